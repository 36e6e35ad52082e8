import Foundation
import Logging
import Synchronization

/// The store every service of a gateway uses: the configured one, with accounts, links and
/// sessions answered from memory once read (`AccountReadCache`).
///
/// Every write made through it drops what it changes once the write has returned, and
/// what other instances write arrives from a `SharedStore` (PostgreSQL's `LISTEN/NOTIFY`)
/// while `followChanges()` runs; as long as that feed is not listening (before it starts,
/// after its connection dropped) nothing is answered from memory. A store that is not shared
/// (SQLite, one process) needs no feed. Whatever the feed might miss is bounded by the
/// cache's lifetime.
///
/// Only what a signed-in read needs is cached: sessions by cookie hash and by family, an
/// account, an account's links. Reads that decide a write (a link by identity, a refresh
/// token's session, pending credentials) always go to the store.
public final class CachedStore: GatehouseStorage {
    /// The configured store.
    public let base: any GatehouseStorage
    let cache: AccountReadCache
    /// Service keys read lately; the change feed drops revoked ones (`ServiceKeyService` reads
    /// through it).
    public let serviceKeys: ServiceKeyCache
    private let clock: any GatehouseClock
    private let metrics: GatehouseMetrics
    private let logger: Logger

    /// Caches at most `capacity` accounts for at most `lifetime` seconds each (0: no cache),
    /// and service keys for `serviceKeyLifetime` seconds each.
    public init(
        _ base: any GatehouseStorage, capacity: Int, lifetime: TimeInterval, serviceKeyLifetime: TimeInterval = 0, clock: any GatehouseClock,
        metrics: GatehouseMetrics = .disabled, logger: Logger = Logger(label: "gatehouse")
    ) {
        self.base = base
        self.serviceKeys = ServiceKeyCache(lifetime: serviceKeyLifetime, clock: clock)
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
        // A shared store's cache starts off: it turns on once the change feed listens.
        cache = AccountReadCache(capacity: capacity, lifetime: lifetime, enabled: !(base is any SharedStore), metrics: metrics)
    }

    /// Follows what other instances write until the task is cancelled, reconnecting after a
    /// lost connection (the cache is off and empty meanwhile). For a store that is not shared
    /// it only waits for the cancellation, so that it can run beside a server all the same.
    public func followChanges() async {
        guard let shared = base as? any SharedStore else {
            while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
            return
        }
        let cache = self.cache
        let serviceKeys = self.serviceKeys
        let logger = self.logger
        var delay = Duration.milliseconds(100)
        while !Task.isCancelled {
            let followed = Mutex(false)
            do {
                try await shared.followChanges { change in
                    switch change {
                    case .following:
                        cache.invalidateAll(enabled: true)
                        serviceKeys.forgetAll()
                        followed.withLock { $0 = true }
                        logger.debug("following the store's changes")
                    case .account(let uid):
                        cache.invalidate(uid: uid)
                    case .serviceKey(let id):
                        serviceKeys.forget(keyId: id)
                    }
                }
            } catch {
                logger.warning(
                    "lost the store's change feed: accounts and sessions are read from the store until it is back",
                    metadata: ["store.error": "\((error as? any StoreFailureSummary)?.storeFailureSummary ?? "\(type(of: error))")"])
            }
            cache.invalidateAll(enabled: false)
            if followed.withLock({ $0 }) { delay = .milliseconds(100) }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(2))
        }
    }

    /// Whether reads may be answered from memory now: a shared store's change feed is
    /// listening (always, for a store that is not shared), and the cache has a lifetime.
    public var answersFromMemory: Bool { cache.isEnabled }

    // MARK: Cached reads

    /// The session with this cookie hash: from memory when held; on a miss it is read with
    /// its account and links in one read, and all three are kept.
    public func session(idHash: String, now: Date) async throws -> SessionRecord? {
        try await signedIn(.cookieHash(idHash), now: now)?.session
    }

    /// The session of a refresh-token family: as `session(idHash:)`.
    public func session(familyId: String, now: Date) async throws -> SessionRecord? {
        try await signedIn(.family(familyId), now: now)?.session
    }

    /// The session with its account and links: from memory when all three are held, else one
    /// read of the store (`GatehouseStorage.signedIn`), kept unless a write overtook it.
    @inline(never)  // its frame stays its own, not part of every caller's (`session(idHash:)`)
    public func signedIn(_ key: SessionKey, now: Date) async throws -> SignedInRecords? {
        if let held = held(key, now: now) { return held }
        return try await readSignedIn(key, now: now)
    }

    /// What memory answers for `key`: the records, or `.some(nil)` for an expired session;
    /// `nil` when something must be read.
    ///
    /// Apart from the read, which is out of line: an async function's frame is allocated
    /// whole on every call, so the read's locals cost every hit, and a connection's task keeps
    /// its deepest frames while the connection is open.
    private func held(_ key: SessionKey, now: Date) -> SignedInRecords?? {
        let held: SessionRecord?
        switch key {
        case .cookieHash(let hash): held = cache.session(idHash: hash, now: clock.now())
        case .family(let family): held = cache.session(familyId: family, now: clock.now())
        }
        if let held {
            guard held.expiresAt > now else {
                metrics.cacheLookup(cache: "account", result: "hit")
                return .some(nil)
            }
            if let account = cache.account(uid: held.uid, now: clock.now()), let links = cache.links(uid: held.uid, now: clock.now()) {
                metrics.cacheLookup(cache: "account", result: "hit")
                return SignedInRecords(session: held, account: account, links: links)
            }
        }
        return nil
    }

    /// One read of the store (`GatehouseStorage.signedIn`), kept unless a write overtook it.
    @inline(never)
    private func readSignedIn(_ key: SessionKey, now: Date) async throws -> SignedInRecords? {
        // A hit only when nothing here is read: a session held without its account or links is a miss.
        metrics.cacheLookup(cache: "account", result: "miss")
        let ticket = cache.ticket()
        guard let records = try await base.signedIn(key, now: now) else { return nil }
        let stamp = clock.now()
        cache.store(records.session, ticket: ticket, now: stamp)
        if let account = records.account { cache.store(account, ticket: ticket, now: stamp) }
        // An account without links is being created or deleted: not worth keeping.
        if !records.links.isEmpty { cache.store(links: records.links, uid: records.session.uid, ticket: ticket, now: stamp) }
        return records
    }

    /// The account: from memory when held.
    public func account(uid: String) async throws -> AccountRecord? {
        if let held = cache.account(uid: uid, now: clock.now()) {
            metrics.cacheLookup(cache: "account", result: "hit")
            return held
        }
        metrics.cacheLookup(cache: "account", result: "miss")
        let ticket = cache.ticket()
        guard let account = try await base.account(uid: uid) else { return nil }
        cache.store(account, ticket: ticket, now: clock.now())
        return account
    }

    /// The account's links: from memory when held.
    public func links(uid: String) async throws -> [ProviderLinkRecord] {
        if let held = cache.links(uid: uid, now: clock.now()) {
            metrics.cacheLookup(cache: "account", result: "hit")
            return held
        }
        metrics.cacheLookup(cache: "account", result: "miss")
        let ticket = cache.ticket()
        let links = try await base.links(uid: uid)
        // An account without links is being created or deleted: not worth keeping.
        if !links.isEmpty { cache.store(links: links, uid: uid, ticket: ticket, now: clock.now()) }
        return links
    }

    // MARK: Writes that change what is cached

    /// Runs a write, then drops what it may have changed (also when it failed: it may have
    /// committed all the same).
    func writing<T>(_ write: () async throws -> T, then invalidate: () -> Void) async throws -> T {
        defer { invalidate() }
        return try await write()
    }

    /// Creates an account with its first link.
    public func createAccount(_ account: AccountRecord, firstLink: ProviderLinkRecord, exclusiveEmail: Bool) async throws {
        try await writing {
            try await base.createAccount(account, firstLink: firstLink, exclusiveEmail: exclusiveEmail)
        } then: {
            cache.invalidate(uid: account.uid)
        }
    }

    /// Records a sign-in.
    public func recordSignIn(
        link: ProviderLinkRecord, at date: Date, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool, keepingTokens: Bool
    ) async throws {
        try await writing {
            try await base.recordSignIn(
                link: link, at: date, replacingClaims: replacingClaims, exclusiveEmail: exclusiveEmail, keepingTokens: keepingTokens)
        } then: {
            cache.invalidate(uid: link.uid)
        }
    }

    /// Replaces a link (and consumes a pending credential).
    public func updateLink(
        _ link: ProviderLinkRecord, consumingPending: String?, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool, keepingTokens: Bool
    ) async throws {
        try await writing {
            try await base.updateLink(
                link, consumingPending: consumingPending, replacingClaims: replacingClaims, exclusiveEmail: exclusiveEmail,
                keepingTokens: keepingTokens)
        } then: {
            cache.invalidate(uid: link.uid)
        }
    }

    /// Replaces a link's profile snapshot.
    public func updateLinkProfile(
        providerId: String, federatedId: String, uid: String, profileJSON: Data, verifiedEmail: String?, at date: Date, exclusiveEmail: Bool
    ) async throws {
        try await writing {
            try await base.updateLinkProfile(
                providerId: providerId, federatedId: federatedId, uid: uid, profileJSON: profileJSON, verifiedEmail: verifiedEmail, at: date,
                exclusiveEmail: exclusiveEmail)
        } then: {
            cache.invalidate(uid: uid)
        }
    }

    /// Adds a link (and consumes a pending credential).
    public func addLink(_ link: ProviderLinkRecord, consumingPending: String?, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool)
        async throws
    {
        try await writing {
            try await base.addLink(link, consumingPending: consumingPending, replacingClaims: replacingClaims, exclusiveEmail: exclusiveEmail)
        } then: {
            cache.invalidate(uid: link.uid)
        }
    }

    /// Removes a link, with the sessions that signed in with it.
    public func deleteLink(uid: String, providerId: String, sparing: String?) async throws -> UnlinkOutcome {
        try await writing {
            try await base.deleteLink(uid: uid, providerId: providerId, sparing: sparing)
        } then: {
            cache.invalidate(uid: uid)
        }
    }

    /// Deletes an account.
    public func deleteAccount(uid: String) async throws -> [ProviderLinkRecord]? {
        try await writing {
            try await base.deleteAccount(uid: uid)
        } then: {
            cache.invalidate(uid: uid)
        }
    }

    /// Replaces a link's sealed tokens (compare and set).
    public func replaceSealedTokens(providerId: String, federatedId: String, expected: String, with sealed: String) async throws -> Bool {
        try await writing {
            try await base.replaceSealedTokens(providerId: providerId, federatedId: federatedId, expected: expected, with: sealed)
        } then: {
            cache.invalidate(providerId: providerId, federatedId: federatedId)
        }
    }

    /// Disables or enables an account (disabling ends its sessions).
    public func setDisabled(uid: String, disabled: Bool) async throws -> FlagChange {
        try await writing {
            try await base.setDisabled(uid: uid, disabled: disabled)
        } then: {
            cache.invalidate(uid: uid)
        }
    }

    /// Replaces an account's custom claims.
    public func setCustomClaims(uid: String, _ claims: ClaimsReplacement) async throws -> FlagChange {
        try await writing {
            try await base.setCustomClaims(uid: uid, claims)
        } then: {
            cache.invalidate(uid: uid)
        }
    }

    /// Ends one session.
    public func deleteSession(idHash: String) async throws {
        try await writing {
            try await base.deleteSession(idHash: idHash)
        } then: {
            cache.invalidate(sessionHash: idHash)
        }
    }

    /// Ends a family's session.
    public func deleteSession(familyId: String) async throws {
        try await writing {
            try await base.deleteSession(familyId: familyId)
        } then: {
            cache.invalidate(familyId: familyId)
        }
    }

    /// Ends every session of an account: whether a live one ended.
    @discardableResult public func deleteSessions(uid: String, now: Date) async throws -> Bool {
        try await writing {
            try await base.deleteSessions(uid: uid, now: now)
        } then: {
            cache.invalidate(uid: uid)
        }
    }

    /// Rotates a refresh token; a reuse revokes its family, and a family that used up its
    /// tokens ends its own session: that family's entries are dropped, no other account's
    /// (anyone holding a spent token can make a reuse).
    public func rotateRefreshToken(tokenHash: String, successor: RefreshSuccessor, now: Date) async throws -> RefreshRotation {
        let rotation: RefreshRotation
        do {
            rotation = try await base.rotateRefreshToken(tokenHash: tokenHash, successor: successor, now: now)
        } catch {
            cache.invalidateAll()
            throw error
        }
        switch rotation {
        case .reused(let familyId): cache.invalidate(familyId: familyId)
        case .exhausted(let session): cache.invalidate(familyId: session.familyId)
        case .rotated, .retried, .unknown: break
        }
        return rotation
    }
}
