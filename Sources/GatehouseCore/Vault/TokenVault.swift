import Crypto
import Foundation
import Synchronization

/// Encrypts provider tokens and the gateway's signing keys at rest with AES-256-GCM, in two
/// layers (envelope encryption).
///
/// Values are sealed with a **data key** kept in storage, where it is itself sealed
/// ("wrapped") by a **configured key** (environment or file, never the database):
/// `v2.<data key id>.<base64url(nonce ‖ ciphertext ‖ tag)>`. Values written before the store
/// had a data key read `v1.<configured key id>.…` and stay readable. The record's identity is
/// authenticated as associated data, so a sealed token copied onto another link does not open.
///
/// Instances reread the data keys every `reloadInterval`; a new data key starts sealing only
/// two intervals after it was stored, so every instance can open what any instance sealed.
public final class TokenVault: Sendable {
    private let configuredKeys: [String: SymmetricKey]
    /// The configured key that wraps data keys (and seals values while no data key exists).
    public let currentKeyID: String
    /// How often the data keys are reread from storage.
    public let reloadInterval: TimeInterval
    private let state = Mutex(DataKeys())

    /// The data keys loaded from storage.
    private struct DataKeys {
        var byID: [String: SymmetricKey] = [:]
        var sealingID: String?
        var loadedAt: Date = .distantPast
        var forcedReloadAt: Date = .distantPast
    }

    /// Where the time comes from (reload intervals, when a new data key starts sealing).
    private let clock: any GatehouseClock

    /// Creates a vault from 32-byte configured keys; the first is current. No data key is
    /// loaded until `refresh(from:)` or `load(from:)`.
    public init(keys: [Data], reloadInterval: TimeInterval = 30, clock: any GatehouseClock = SystemClock()) throws {
        self.clock = clock
        guard let first = keys.first else { throw GatehouseError.invalidArgument("the token vault needs at least one key") }
        var byID: [String: SymmetricKey] = [:]
        for key in keys {
            guard key.count == 32 else { throw GatehouseError.invalidArgument("encryption keys must be 32 bytes (AES-256)") }
            byID[Self.keyID(for: key)] = SymmetricKey(data: key)
        }
        self.configuredKeys = byID
        self.currentKeyID = Self.keyID(for: first)
        self.reloadInterval = reloadInterval
    }

    /// A key id derived from the key itself (not secret: 8 hex digits of a hash of a hash).
    public static func keyID(for key: Data) -> String {
        String(SecureRandom.digest(SecureRandom.digest(key.base64EncodedString())).prefix(8))
    }

    /// A fresh random 32-byte key.
    public static func generateKey() -> Data {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
    }

    /// The data key new values are sealed with; `nil` while none is loaded.
    public var sealingDataKeyID: String? { state.withLock { $0.sealingID } }

    /// The label (`v2.<id>` or `v1.<id>`) of the key new values are sealed with.
    public var currentLabel: String { sealingDataKeyID.map { "v2.\($0)" } ?? "v1.\(currentKeyID)" }

    /// Encrypts `plaintext`, binding it to `context` (e.g. `provider-tokens|github.com|583231`).
    public func seal(_ plaintext: Data, context: String) throws -> String {
        let sealing = state.withLock { state in state.sealingID.flatMap { id in state.byID[id].map { (id, $0) } } }
        guard let (id, key) = sealing else { return try Self.seal(plaintext, context: context, label: "v1.\(currentKeyID)", key: configuredKey) }
        return try Self.seal(plaintext, context: context, label: "v2.\(id)", key: key)
    }

    /// Whether `sealed` is under the key new values are sealed with (nothing for a rotation to do).
    public func isCurrent(_ sealed: String) -> Bool {
        sealed.hasPrefix(currentLabel + ".")
    }

    /// Decrypts a sealed value; throws if its key is unknown, the value was altered or the
    /// context differs.
    public func open(_ sealed: String, context: String) throws -> Data {
        let parts = sealed.split(separator: ".", maxSplits: 2).map(String.init)
        guard parts.count == 3, let combined = Base64URL.decode(parts[2]) else { throw VaultError.unreadable }
        let key: SymmetricKey?
        switch parts[0] {
        case "v1": key = configuredKeys[parts[1]]
        case "v2": key = state.withLock { $0.byID[parts[1]] }
        default: key = nil
        }
        guard let key else { throw VaultError.unreadable }
        do {
            return try AES.GCM.open(AES.GCM.SealedBox(combined: combined), using: key, authenticating: Data(context.utf8))
        } catch {
            throw VaultError.unreadable
        }
    }

    /// `open`, after rereading the data keys when they are stale or — at most once a second —
    /// when the value names a data key this instance has not loaded.
    public func open(_ sealed: String, context: String, storage: any GatehouseStorage) async throws -> Data {
        try await refresh(from: storage)
        if sealed.hasPrefix("v2."), let id = sealed.split(separator: ".").dropFirst().first.map(String.init) {
            let reload = state.withLock { state in
                guard state.byID[id] == nil, clock.now() >= state.forcedReloadAt else { return false }
                state.forcedReloadAt = clock.now().addingTimeInterval(1)
                return true
            }
            if reload { try await load(from: storage) }
        }
        return try open(sealed, context: context)
    }

    /// Rereads the data keys if they were loaded more than `reloadInterval` ago (or never).
    public func refresh(from storage: any GatehouseStorage) async throws {
        let stale = state.withLock { clock.now().timeIntervalSince($0.loadedAt) > reloadInterval }
        if stale { try await load(from: storage) }
    }

    /// Reads the data keys and picks the sealing one: the newest stored at least two reload
    /// intervals ago, else the oldest (a store's first key seals at once). A fresh store gets
    /// its first data key here; a store holding values sealed by configured keys alone keeps
    /// sealing that way until `gatehouse keys rotate-encryption` adds one, so replicas of an
    /// older version are never handed values they cannot open during a rolling upgrade.
    public func load(from storage: any GatehouseStorage) async throws {
        var records = try await storage.dataKeys()
        if records.isEmpty {
            records = try await storage.withLock("data-key-bootstrap") {
                guard try await storage.dataKeys().isEmpty, try await storage.sealingKeyUsage(now: clock.now()).isEmpty else {
                    return try await storage.dataKeys()
                }
                try await storage.insertDataKey(try self.newDataKey())
                return try await storage.dataKeys()
            }
        }
        var byID: [String: SymmetricKey] = [:]
        var readable: [DataKeyRecord] = []
        for record in records {
            // A key wrapped by a configured key that is gone opens nothing; the rest still work.
            guard let key = try? unwrap(record) else { continue }
            byID[record.id] = key
            readable.append(record)
        }
        if !records.isEmpty && readable.isEmpty { throw VaultError.noUsableDataKey }
        let now = clock.now()
        let sealing = readable.first { $0.createdAt.addingTimeInterval(2 * reloadInterval) <= now } ?? readable.last
        state.withLock { state in
            state.byID = byID
            state.sealingID = sealing?.id
            state.loadedAt = now
        }
    }

    /// A new random data key, wrapped by the current configured key (not stored yet).
    public func newDataKey(at date: Date? = nil) throws -> DataKeyRecord {
        let date = date ?? clock.now()
        let id = "dk" + String(SecureRandom.digest(UUID().uuidString + "\(date.timeIntervalSince1970)").prefix(14))
        return DataKeyRecord(id: id, wrappedKey: try wrap(Self.generateKey(), id: id), createdAt: date)
    }

    /// The data key in plain, under the current configured key (a key-encryption-key rotation).
    public func rewrap(_ record: DataKeyRecord) throws -> String {
        try wrap(unwrap(record).withUnsafeBytes { Data($0) }, id: record.id)
    }

    /// Whether the data key is wrapped by the current configured key.
    public func isWrappedByCurrentKey(_ record: DataKeyRecord) -> Bool {
        record.wrappedKey.hasPrefix("v1.\(currentKeyID).")
    }

    /// Why the vault failed (deliberately without detail about the value).
    public enum VaultError: Error, Sendable, CustomStringConvertible {
        /// Unknown key, altered value or wrong context.
        case unreadable
        /// The store has data keys, but no configured key unwraps any of them: the
        /// configuration is wrong (a server error, not the user's).
        case noUsableDataKey

        /// What an operator reads.
        public var description: String {
            switch self {
            case .unreadable: "a sealed value could not be opened"
            case .noUsableDataKey:
                "no stored data key opens with the configured encryption keys (GATEHOUSE_ENCRYPTION_KEY, GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS)"
            }
        }
    }

    // MARK: Private

    private var configuredKey: SymmetricKey {
        // `init` put the current key in the dictionary.
        configuredKeys[currentKeyID]!
    }

    private func wrap(_ dataKey: Data, id: String) throws -> String {
        try Self.seal(dataKey, context: Self.wrapContext(id), label: "v1.\(currentKeyID)", key: configuredKey)
    }

    private func unwrap(_ record: DataKeyRecord) throws -> SymmetricKey {
        let parts = record.wrappedKey.split(separator: ".", maxSplits: 2).map(String.init)
        guard parts.count == 3, parts[0] == "v1" else { throw VaultError.unreadable }
        // Only configured keys wrap data keys: `open` would also try data keys for `v2`.
        let raw = try open(record.wrappedKey, context: Self.wrapContext(record.id))
        guard raw.count == 32 else { throw VaultError.unreadable }
        return SymmetricKey(data: raw)
    }

    private static func wrapContext(_ id: String) -> String { "data-key|\(id)" }

    private static func seal(_ plaintext: Data, context: String, label: String, key: SymmetricKey) throws -> String {
        let box = try AES.GCM.seal(plaintext, using: key, authenticating: Data(context.utf8))
        guard let combined = box.combined else { throw GatehouseError.internalError() }
        return "\(label).\(Base64URL.encode(combined))"
    }
}
