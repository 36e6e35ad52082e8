import Crypto
import Foundation

/// Encrypts provider tokens and the gateway's signing keys at rest with AES-256-GCM, in two
/// layers (envelope encryption).
///
/// Values are sealed with a **data key** kept in storage, where it is itself sealed
/// ("wrapped") by a **configured key** (environment or file, never the database):
/// `v2.<data key id>.<base64url(nonce ‖ ciphertext ‖ tag)>`. Values written before the store
/// had a data key read `v1.<configured key id>.…` and stay readable. The record's identity is
/// authenticated as associated data, so a sealed token copied onto another link does not open.
///
/// The vault keeps its data-key ring itself (`DataKeyRing`): it rereads the keys every
/// `reloadInterval`, and a new data key starts sealing only two intervals after it was
/// stored, so every instance can open what any instance sealed. Callers never hand it the
/// store.
public final class TokenVault: Sendable {
    private let configured: ConfiguredKeys
    /// The data keys; `nil` for a vault of configured keys alone (tools and tests).
    private let ring: DataKeyRing?
    /// How often the data keys are reread from storage.
    public let reloadInterval: TimeInterval

    /// Creates a vault from 32-byte configured keys (the first is current) over the data keys
    /// of `store`; without a store it seals with the current configured key. Nothing is read
    /// until the first use.
    public init(
        keys: [Data], store: (any DataKeyStore)? = nil, reloadInterval: TimeInterval = 30, clock: any GatehouseClock = SystemClock()
    ) throws {
        let configured = try ConfiguredKeys(keys)
        self.configured = configured
        self.reloadInterval = reloadInterval
        ring = store.map { DataKeyRing(store: $0, configured: configured, reloadInterval: reloadInterval, clock: clock) }
    }

    /// A key id derived from the key itself (not secret: 8 hex digits of a hash of a hash).
    public static func keyID(for key: Data) -> String {
        String(SecureRandom.digest(SecureRandom.digest(key.base64EncodedString())).prefix(8))
    }

    /// A fresh random 32-byte key.
    public static func generateKey() -> Data {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
    }

    /// The configured key that wraps data keys (and seals values while no data key exists).
    public var currentKeyID: String { configured.currentID }

    /// The data key new values are sealed with, as last loaded; `nil` while none is.
    public var sealingDataKeyID: String? { ring?.sealing?.id }

    /// The label (`v2.<id>` or `v1.<id>`) of the key new values are sealed with.
    public var currentLabel: String { sealingDataKeyID.map { "v2.\($0)" } ?? "v1.\(currentKeyID)" }

    /// Encrypts `plaintext`, binding it to `context` (e.g. `provider-tokens|github.com|583231`),
    /// under the current data key (rereading the ring first when it is stale).
    public func seal(_ plaintext: Data, context: String) async throws -> String {
        try await ring?.refreshIfStale()
        guard let (id, key) = ring?.sealing else {
            return try ConfiguredKeys.seal(plaintext, context: context, label: "v1.\(currentKeyID)", key: configured.current)
        }
        return try ConfiguredKeys.seal(plaintext, context: context, label: "v2.\(id)", key: key)
    }

    /// Whether `sealed` is under the key new values are sealed with (nothing for a rotation to do).
    public func isCurrent(_ sealed: String) -> Bool {
        sealed.hasPrefix(currentLabel + ".")
    }

    /// Decrypts a sealed value; throws `unreadable` if its key is unknown, the value was
    /// altered or the context differs. A value naming a data key this instance has not loaded
    /// rereads the ring first (at most once a second); a store failure meanwhile is thrown as
    /// itself, never as `unreadable`.
    public func open(_ sealed: String, context: String) async throws -> Data {
        let parts = sealed.split(separator: ".", maxSplits: 2).map(String.init)
        guard parts.count == 3 else { throw VaultError.unreadable }
        let key: SymmetricKey?
        switch parts[0] {
        case "v1": key = configured.byID[parts[1]]
        case "v2": key = try await ring?.key(named: parts[1])
        default: key = nil
        }
        guard let key else { throw VaultError.unreadable }
        return try ConfiguredKeys.open(parts[2], context: context, key: key)
    }

    /// Rereads the data keys now (a rotation, after adding a key); throws `noDataKeyStore`
    /// for a vault of configured keys alone.
    public func reload() async throws {
        guard let ring else { throw VaultError.noDataKeyStore }
        try await ring.reload()
    }

    /// A new random data key, wrapped by the current configured key (not stored yet).
    public func newDataKey(at date: Date = Date()) throws -> DataKeyRecord {
        try configured.newDataKey(at: date)
    }

    /// The data key in plain, under the current configured key (a key-encryption-key rotation).
    public func rewrap(_ record: DataKeyRecord) throws -> String {
        try configured.rewrap(record)
    }

    /// Whether the data key is wrapped by the current configured key.
    public func isWrappedByCurrentKey(_ record: DataKeyRecord) -> Bool {
        configured.wrapsCurrently(record)
    }

    /// Why the vault failed (deliberately without detail about the value).
    public enum VaultError: Error, Sendable, CustomStringConvertible {
        /// Unknown key, altered value or wrong context.
        case unreadable
        /// The store has data keys, but no configured key unwraps any of them: the
        /// configuration is wrong (a server error, not the user's).
        case noUsableDataKey
        /// The vault was made without a store, so it has no data keys to reload (a
        /// programming error).
        case noDataKeyStore

        /// What an operator reads.
        public var description: String {
            switch self {
            case .unreadable: "a sealed value could not be opened"
            case .noUsableDataKey:
                "no stored data key opens with the configured encryption keys (GATEHOUSE_ENCRYPTION_KEY, GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS)"
            case .noDataKeyStore: "this token vault was made without a store for data keys"
            }
        }
    }
}
