import Foundation

/// The gateway's signing keys and the vault's data keys, and what each key seals. Part of `GatehouseStorage`.
public protocol KeyStore: Sendable {
    /// Saves a new signing key.
    func insertSigningKey(_ key: SigningKeyRecord) async throws
    /// Every signing key, newest first.
    func signingKeys() async throws -> [SigningKeyRecord]
    /// Replaces a signing key's sealed private key if it is still `expected` (re-encryption).
    func replaceSealedSigningKey(kid: String, expected: String, with sealed: String) async throws -> Bool
    /// Saves a new data key; a taken id is `StorageError.conflict`.
    func insertDataKey(_ key: DataKeyRecord) async throws
    /// Every data key, newest first.
    func dataKeys() async throws -> [DataKeyRecord]
    /// Replaces a data key's wrapping if it is still `expected` (a new key-encryption key).
    func replaceWrappedDataKey(id: String, expected: String, with wrapped: String) async throws -> Bool
    /// Deletes a data key; whether it existed.
    func deleteDataKey(id: String) async throws -> Bool
    /// How many stored sealed values each key seals — provider tokens of links, signing keys,
    /// unexpired pending credentials and what retry windows keep — by label: the sealed value's first two dot-separated
    /// parts (`v1.<configured key id>` or `v2.<data key id>`).
    func sealingKeyUsage(now: Date) async throws -> [String: Int]
    /// Whether any sealed value `sealingKeyUsage` counts is stored: at most a row of each
    /// kind read, where the census reads them all (the data-key bootstrap asks on every
    /// reread of a ring that has no data key).
    func holdsSealedValues(now: Date) async throws -> Bool
}
