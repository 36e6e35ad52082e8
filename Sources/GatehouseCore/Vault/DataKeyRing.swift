import Crypto
import Foundation
import Synchronization

/// The store parts the vault's data keys live in.
public typealias DataKeyStore = KeyStore & LockStore

/// The store's data keys as this instance knows them. The ring rereads them on its own when
/// they are older than `reloadInterval`, or — at most once a second — when a value names a
/// key it has not loaded; concurrent rereads share one run.
final class DataKeyRing: Sendable {
    /// Where the data keys are stored.
    let store: any DataKeyStore
    /// How often the data keys are reread.
    let reloadInterval: TimeInterval
    private let configured: ConfiguredKeys
    private let clock: any GatehouseClock
    private let state = Mutex(Loaded())
    /// Rereads in progress: one for staleness, one forced (a forced reread must not join a
    /// staleness run that began before the key it looks for existed and found nothing to do).
    private let loads = SingleFlight<Reread, Void>()

    private enum Reread: Hashable { case whenStale, forced }

    /// What the last load found.
    private struct Loaded {
        var byID: [String: SymmetricKey] = [:]
        var sealingID: String?
        var loadedAt: Date = .distantPast
        var forcedReloadAt: Date = .distantPast
    }

    /// A ring with nothing loaded yet.
    init(store: any DataKeyStore, configured: ConfiguredKeys, reloadInterval: TimeInterval, clock: any GatehouseClock) {
        self.store = store
        self.configured = configured
        self.reloadInterval = reloadInterval
        self.clock = clock
    }

    /// The data key new values are sealed with, as last loaded.
    var sealing: (id: String, key: SymmetricKey)? {
        state.withLock { state in state.sealingID.flatMap { id in state.byID[id].map { (id, $0) } } }
    }

    /// The loaded data key `id`.
    func key(_ id: String) -> SymmetricKey? { state.withLock { $0.byID[id] } }

    /// Rereads the data keys when they were loaded more than `reloadInterval` ago (or never).
    func refreshIfStale() async throws {
        guard isStale else { return }
        // A caller that saw a stale ring just as another reread ended starts a run that finds
        // the ring fresh and reads nothing.
        try await loads.run(.whenStale) { [self] in if isStale { try await load() } }
    }

    private var isStale: Bool {
        state.withLock { clock.now().timeIntervalSince($0.loadedAt) > reloadInterval }
    }

    /// The data key `id`, rereading the ring when it is stale or does not know `id` (another
    /// instance may have just added it; at most one such reread a second).
    func key(named id: String) async throws -> SymmetricKey? {
        try await refreshIfStale()
        let reread = state.withLock { state in
            guard state.byID[id] == nil, clock.now() >= state.forcedReloadAt else { return false }
            state.forcedReloadAt = clock.now().addingTimeInterval(1)
            return true
        }
        if reread { try await reload() }
        return key(id)
    }

    /// Rereads the data keys now (joining a forced reread in progress).
    func reload() async throws {
        try await loads.run(.forced) { [self] in try await load() }
    }

    /// Reads the data keys and picks the sealing one: the newest stored at least two reload
    /// intervals ago, else the oldest (a store's first key seals at once). A fresh store gets
    /// its first data key here; a store holding values sealed by configured keys alone keeps
    /// sealing that way until `gatehouse keys rotate-encryption` adds one, so replicas of an
    /// older version are never handed values they cannot open during a rolling upgrade.
    private func load() async throws {
        let store = self.store
        let started = clock.now()
        var records = try await store.dataKeys()
        if records.isEmpty {
            let (configured, now) = (self.configured, clock.now())
            records = try await store.withLock("data-key-bootstrap") {
                guard try await store.dataKeys().isEmpty, try await !store.holdsSealedValues(now: now) else {
                    return try await store.dataKeys()
                }
                try await store.insertDataKey(try configured.newDataKey(at: now))
                return try await store.dataKeys()
            }
        }
        var byID: [String: SymmetricKey] = [:]
        var readable: [DataKeyRecord] = []
        for record in records {
            // A key wrapped by a configured key that is gone opens nothing; the rest still work.
            guard let key = try? configured.unwrap(record) else { continue }
            byID[record.id] = key
            readable.append(record)
        }
        if !records.isEmpty && readable.isEmpty { throw TokenVault.VaultError.noUsableDataKey }
        let now = clock.now()
        let sealing = readable.first { $0.createdAt.addingTimeInterval(2 * reloadInterval) <= now } ?? readable.last
        state.withLock { state in
            // Two rereads may overlap: the one that began later read the newer keys.
            guard started >= state.loadedAt else { return }
            state.byID = byID
            state.sealingID = sealing?.id
            state.loadedAt = started
        }
    }
}
