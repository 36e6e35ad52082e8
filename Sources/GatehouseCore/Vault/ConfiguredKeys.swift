import Crypto
import Foundation

/// The encryption keys the operator configures (environment or file, never the database):
/// the first seals, all open. They wrap the store's data keys, and seal values themselves
/// while the store has none.
struct ConfiguredKeys: Sendable {
    /// Every configured key by id.
    let byID: [String: SymmetricKey]
    /// The id of the key that seals and wraps.
    let currentID: String
    /// The key that seals and wraps.
    let current: SymmetricKey

    /// 32-byte keys, the current one first.
    init(_ keys: [Data]) throws {
        guard let first = keys.first else { throw GatehouseError.invalidArgument("the token vault needs at least one key") }
        var byID: [String: SymmetricKey] = [:]
        for key in keys {
            guard key.count == 32 else { throw GatehouseError.invalidArgument("encryption keys must be 32 bytes (AES-256)") }
            byID[TokenVault.keyID(for: key)] = SymmetricKey(data: key)
        }
        self.byID = byID
        currentID = TokenVault.keyID(for: first)
        current = SymmetricKey(data: first)
    }

    /// A new random data key, wrapped by the current key (not stored yet).
    func newDataKey(at date: Date) throws -> DataKeyRecord {
        let id = "dk" + String(SecureRandom.digest(UUID().uuidString + "\(date.timeIntervalSince1970)").prefix(14))
        return DataKeyRecord(id: id, wrappedKey: try wrap(TokenVault.generateKey(), id: id), createdAt: date)
    }

    /// The data key in plain, wrapped again under the current key.
    func rewrap(_ record: DataKeyRecord) throws -> String {
        try wrap(unwrap(record).withUnsafeBytes { Data($0) }, id: record.id)
    }

    /// Whether the data key is wrapped by the current key.
    func wrapsCurrently(_ record: DataKeyRecord) -> Bool {
        record.wrappedKey.hasPrefix("v1.\(currentID).")
    }

    /// The data key of a stored record; throws `unreadable` when no configured key wraps it.
    func unwrap(_ record: DataKeyRecord) throws -> SymmetricKey {
        let parts = record.wrappedKey.split(separator: ".", maxSplits: 2).map(String.init)
        // Only configured keys wrap data keys, never other data keys.
        guard parts.count == 3, parts[0] == "v1", let key = byID[parts[1]] else { throw TokenVault.VaultError.unreadable }
        let raw = try Self.open(parts[2], context: Self.wrapContext(record.id), key: key)
        guard raw.count == 32 else { throw TokenVault.VaultError.unreadable }
        return SymmetricKey(data: raw)
    }

    private func wrap(_ dataKey: Data, id: String) throws -> String {
        try Self.seal(dataKey, context: Self.wrapContext(id), label: "v1.\(currentID)", key: current)
    }

    private static func wrapContext(_ id: String) -> String { "data-key|\(id)" }

    /// `label.base64url(nonce ‖ ciphertext ‖ tag)`, with `context` as associated data.
    static func seal(_ plaintext: Data, context: String, label: String, key: SymmetricKey) throws -> String {
        let box = try AES.GCM.seal(plaintext, using: key, authenticating: Data(context.utf8))
        guard let combined = box.combined else { throw GatehouseError.internalError() }
        return "\(label).\(Base64URL.encode(combined))"
    }

    /// The plaintext of a sealed value's last part; `unreadable` whatever went wrong.
    static func open(_ encoded: String, context: String, key: SymmetricKey) throws -> Data {
        guard let combined = Base64URL.decode(encoded) else { throw TokenVault.VaultError.unreadable }
        do {
            return try AES.GCM.open(AES.GCM.SealedBox(combined: combined), using: key, authenticating: Data(context.utf8))
        } catch {
            throw TokenVault.VaultError.unreadable
        }
    }
}
