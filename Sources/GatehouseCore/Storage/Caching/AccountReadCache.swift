import Foundation
import Synchronization

/// Accounts, their links and their sessions as last read from the store, per account, so
/// that a signed-in read (`/v1/me`, a bearer check) needs no database round trip.
///
/// Bounded: two generations of at most `capacity / 2` accounts and `byteBudget / 2` bytes
/// each (the older one is dropped when the newer one fills up, a hit moves an account to the
/// newer one), at most `sessionsPerAccount` sessions each, and nothing older than `lifetime`
/// is answered. Accounts are weighed in bytes because a link holds its provider's whole
/// answer (`profileJSON`, up to a megabyte from a hostile provider) beside its sealed tokens:
/// counted by entries alone, ten thousand such accounts would hold gigabytes.
/// Invalidated by account: whatever changes an account, a link or a session drops all that
/// is held for that account. Reads that were in flight across an invalidation are not
/// stored (`Ticket`): an answer read before a write can never be kept after it.
final class AccountReadCache: Sendable {
    /// What is held for one account.
    struct Entry {
        var account: AccountRecord?
        var links: [ProviderLinkRecord]?
        var sessions: [SessionRecord] = []
        /// When the first piece was stored: the whole entry goes once this is `lifetime` old.
        var storedAt: Date
        /// About the memory the entry holds (`weigh(uid:)`), set whenever it changes.
        var bytes = 0

        /// Sets `bytes`: every string's and data's bytes, and `recordBytes` for the entry and
        /// for each record it holds (its struct, its lookup keys and their table slots).
        mutating func weigh(uid: String) {
            var total = AccountReadCache.recordBytes + uid.utf8.count
            if let account {
                total += AccountReadCache.recordBytes + account.uid.utf8.count + (account.customClaims?.count ?? 0)
            }
            for link in links ?? [] {
                total += AccountReadCache.recordBytes + link.uid.utf8.count + link.providerId.utf8.count + link.federatedId.utf8.count
                total += link.profileJSON.count + link.sealedTokens.utf8.count + (link.verifiedEmail?.utf8.count ?? 0)
            }
            for session in sessions {
                total += AccountReadCache.recordBytes + session.idHash.utf8.count + session.uid.utf8.count + session.familyId.utf8.count
                total += session.signInProvider.utf8.count + (session.claims?.count ?? 0)
            }
            bytes = total
        }
    }

    /// The bytes all held accounts may weigh together by default (`Entry.weigh`).
    static let defaultByteBudget = 32 << 20
    /// What a record is charged beside its strings and data.
    static let recordBytes = 128

    /// Where the keys of the other lookups point (per generation, dropped with it).
    private struct Generation {
        var entries: [String: Entry] = [:]
        var uidBySession: [String: String] = [:]
        var uidByFamily: [String: String] = [:]
        var uidByIdentity: [String: String] = [:]
        /// What its entries weigh together.
        var bytes = 0

        mutating func remove(_ uid: String) -> Entry? {
            guard let entry = entries.removeValue(forKey: uid) else { return nil }
            bytes -= entry.bytes
            for session in entry.sessions {
                uidBySession[session.idHash] = nil
                uidByFamily[session.familyId] = nil
            }
            for link in entry.links ?? [] { uidByIdentity[AccountReadCache.identity(link.providerId, link.federatedId)] = nil }
            return entry
        }

        mutating func put(_ entry: Entry, for uid: String) {
            entries[uid] = entry
            bytes += entry.bytes
            for session in entry.sessions {
                uidBySession[session.idHash] = uid
                uidByFamily[session.familyId] = uid
            }
            for link in entry.links ?? [] { uidByIdentity[AccountReadCache.identity(link.providerId, link.federatedId)] = uid }
        }
    }

    private struct State {
        var newer = Generation()
        var older = Generation()
        /// Counts invalidations: a read stores its answer only if none happened since it began.
        var epoch: UInt64 = 0
        /// Off while the store cannot tell what other instances write (see `CachedStore`).
        var enabled: Bool
        /// What both generations weigh.
        var bytes: Int { newer.bytes + older.bytes }
    }

    /// Proof of when a read began.
    struct Ticket: Sendable {
        fileprivate let epoch: UInt64
    }

    private let state: Mutex<State>
    private let generationSize: Int
    private let generationBytes: Int
    private let metrics: GatehouseMetrics
    private let sessionsPerAccount: Int
    private let lifetime: TimeInterval
    /// Whether a lifetime and a capacity were given at all.
    private let usable: Bool

    /// A cache of at most `capacity` accounts weighing `byteBudget` bytes together, each
    /// answered for at most `lifetime` seconds; `gatehouse_cache_used{cache="account"}`
    /// reports their weight.
    init(
        capacity: Int, lifetime: TimeInterval, byteBudget: Int = defaultByteBudget, sessionsPerAccount: Int = 16, enabled: Bool,
        metrics: GatehouseMetrics = .disabled
    ) {
        generationSize = max(1, capacity / 2)
        generationBytes = max(1, byteBudget / 2)
        self.metrics = metrics
        self.lifetime = lifetime
        self.sessionsPerAccount = sessionsPerAccount
        usable = lifetime > 0 && capacity > 0
        state = Mutex(State(enabled: enabled && usable))
    }

    static func identity(_ providerId: String, _ federatedId: String) -> String { providerId + "\n" + federatedId }

    // MARK: Lookups

    /// The session with this cookie hash, if held (`nil`: ask the store), expired or not;
    /// `now` is the cache's own time (entry age), not a session's.
    func session(idHash: String, now: Date) -> SessionRecord? {
        withEntry(of: { $0.uidBySession[idHash] }, now: now) { $0.sessions.first { $0.idHash == idHash } }
    }

    /// The session of this refresh-token family, if held.
    func session(familyId: String, now: Date) -> SessionRecord? {
        withEntry(of: { $0.uidByFamily[familyId] }, now: now) { $0.sessions.first { $0.familyId == familyId } }
    }

    /// The account, if held.
    func account(uid: String, now: Date) -> AccountRecord? {
        withEntry(of: { $0.entries[uid] == nil ? nil : uid }, now: now) { $0.account }
    }

    /// The account's links, if held.
    func links(uid: String, now: Date) -> [ProviderLinkRecord]? {
        withEntry(of: { $0.entries[uid] == nil ? nil : uid }, now: now) { $0.links }
    }

    /// Finds the account a key points to in either generation (moving it to the newer one),
    /// drops it when too old, and reads `piece` of it.
    private func withEntry<T>(of key: (Generation) -> String?, now: Date, _ piece: (Entry) -> T?) -> T? {
        state.withLock { state in
            guard state.enabled else { return nil }
            if let uid = key(state.newer), let entry = state.newer.entries[uid] {
                guard now.timeIntervalSince(entry.storedAt) < lifetime else {
                    _ = state.newer.remove(uid)
                    publish(state.bytes)
                    return nil
                }
                return piece(entry)
            }
            guard let uid = key(state.older), let entry = state.older.remove(uid) else { return nil }
            defer { publish(state.bytes) }
            guard now.timeIntervalSince(entry.storedAt) < lifetime else { return nil }
            put(entry, for: uid, into: &state)
            return piece(entry)
        }
    }

    // MARK: Storing what was read

    /// Taken before a read from the store; its answer is stored only with it.
    func ticket() -> Ticket {
        state.withLock { Ticket(epoch: $0.epoch) }
    }

    /// Stores a session read with `ticket`.
    func store(_ session: SessionRecord, ticket: Ticket, now: Date) {
        update(session.uid, ticket: ticket, now: now) { entry in
            guard !entry.sessions.contains(where: { $0.idHash == session.idHash }) else { return }
            if entry.sessions.count >= sessionsPerAccount { entry.sessions.removeFirst() }
            entry.sessions.append(session)
        }
    }

    /// Stores an account read with `ticket`.
    func store(_ account: AccountRecord, ticket: Ticket, now: Date) {
        update(account.uid, ticket: ticket, now: now) { $0.account = account }
    }

    /// Stores an account's links read with `ticket`.
    func store(links: [ProviderLinkRecord], uid: String, ticket: Ticket, now: Date) {
        update(uid, ticket: ticket, now: now) { $0.links = links }
    }

    private func update(_ uid: String, ticket: Ticket, now: Date, _ change: (inout Entry) -> Void) {
        state.withLock { state in
            guard state.enabled, state.epoch == ticket.epoch else { return }
            var entry = state.newer.remove(uid) ?? state.older.remove(uid) ?? Entry(storedAt: now)
            if now.timeIntervalSince(entry.storedAt) >= lifetime { entry = Entry(storedAt: now) }
            change(&entry)
            entry.weigh(uid: uid)
            put(entry, for: uid, into: &state)
            publish(state.bytes)
        }
    }

    /// Reports what the held accounts weigh. Called under the lock, so that the last report is
    /// always of the last change (reported after it, two changes could land in either order).
    private func publish(_ bytes: Int) {
        metrics.cacheUsed(cache: "account", cost: bytes)
    }

    /// Puts an entry into the newer generation, which becomes the older one first when it
    /// holds its accounts or its bytes already. An entry heavier than a generation is not held
    /// (its reads go to the store).
    private func put(_ entry: Entry, for uid: String, into state: inout State) {
        guard entry.bytes <= generationBytes else { return }
        if state.newer.entries.count >= generationSize || state.newer.bytes + entry.bytes > generationBytes {
            state.older = state.newer
            state.newer = Generation()
        }
        state.newer.put(entry, for: uid)
    }

    // MARK: Invalidation

    /// Drops what is held for the account.
    func invalidate(uid: String) {
        state.withLock { state in
            state.epoch &+= 1
            _ = state.newer.remove(uid)
            _ = state.older.remove(uid)
            publish(state.bytes)
        }
    }

    /// Drops what is held for the account of this session (cookie hash), if any.
    func invalidate(sessionHash: String) {
        invalidate { $0.uidBySession[sessionHash] }
    }

    /// Drops what is held for the account of this refresh-token family, if any.
    func invalidate(familyId: String) {
        invalidate { $0.uidByFamily[familyId] }
    }

    /// Drops what is held for the account linked to this identity, if any.
    func invalidate(providerId: String, federatedId: String) {
        let identity = Self.identity(providerId, federatedId)
        invalidate { $0.uidByIdentity[identity] }
    }

    private func invalidate(_ key: (Generation) -> String?) {
        state.withLock { state in
            state.epoch &+= 1
            for uid in [key(state.newer), key(state.older)].compactMap({ $0 }) {
                _ = state.newer.remove(uid)
                _ = state.older.remove(uid)
            }
            publish(state.bytes)
        }
    }

    /// Drops everything; with `enabled`, also turns the cache on or off.
    func invalidateAll(enabled: Bool? = nil) {
        state.withLock { state in
            state.epoch &+= 1
            state.newer = Generation()
            state.older = Generation()
            if let enabled { state.enabled = enabled && usable }
            publish(state.bytes)
        }
    }

    /// Whether anything is stored and answered.
    var isEnabled: Bool { state.withLock { $0.enabled } }

    /// How many accounts are held (tests).
    var count: Int { state.withLock { $0.newer.entries.count + $0.older.entries.count } }

    /// What the held accounts weigh (tests).
    var bytes: Int { state.withLock { $0.bytes } }

    /// How many keys the session, family and identity lookups hold (tests: never more than the
    /// sessions and links held).
    var lookupKeys: Int {
        state.withLock { state in
            [state.newer, state.older].reduce(0) { $0 + $1.uidBySession.count + $1.uidByFamily.count + $1.uidByIdentity.count }
        }
    }
}
