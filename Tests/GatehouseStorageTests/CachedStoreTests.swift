import Foundation
import GRDB
@_spi(Testing) import GatehouseCore
import GatehousePostgres
import GatehouseSQLite
import GatehouseTestSupport
import Logging
import MetricsTestKit
import PostgresNIO
import Testing

/// `CachedStore`: signed-in reads answered from memory, and every write, this instance's or
/// another's, seen by the next read (issue #18).
@Suite struct CachedStoreTests {
    /// A SQLite store with one account (two links) and one session, and a cache over it.
    static func seeded() async throws -> (base: SQLiteStorage, cached: CachedStore, clock: OffsetClock) {
        let base = try SQLiteStorage(path: try StorageBackend.temporaryDatabasePath())
        try await base.migrate()
        try await base.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await base.addLink(Fixtures.link("u1", provider: "oidc.x", federatedId: "x1"))
        try await base.insertSession(Fixtures.session("s1", uid: "u1"))
        let clock = OffsetClock()
        return (base, CachedStore(base, capacity: 100, lifetime: 60, clock: clock), clock)
    }

    /// The reads a signed-in request makes, through `store`.
    static func reads(_ store: any GatehouseStorage) async throws -> (
        session: SessionRecord?, family: SessionRecord?, account: AccountRecord?, links: [String]
    ) {
        (
            try await store.session(idHash: SecureRandom.digest("s1"), now: Fixtures.now),
            try await store.session(familyId: "family-s1", now: Fixtures.now),
            try await store.account(uid: "u1"), try await store.links(uid: "u1").map(\.providerId)
        )
    }

    @Test(
        "a session miss reads the session, its account and its links in one store read and keeps all three: account and links are then answered from memory without their own read (cookie and family)"
    )
    func oneReadOnAMiss() async throws {
        for key in [SessionKey.cookieHash(SecureRandom.digest("s1")), .family("family-s1")] {
            let (base, cached, _) = try await Self.seeded()
            switch key {
            case .cookieHash(let hash): #expect(try await cached.session(idHash: hash, now: Fixtures.now) != nil)
            case .family(let family): #expect(try await cached.session(familyId: family, now: Fixtures.now) != nil)
            }
            // Behind its back: had account and links not come with the session, these reads would see it.
            try await base.addLink(Fixtures.link("u1", provider: "oidc.y", federatedId: "y1"))
            #expect(try await base.setDisabled(uid: "u1", disabled: true) == .changed)
            #expect(try await cached.account(uid: "u1")?.disabled == false, "\(key)")
            #expect(try await cached.links(uid: "u1").map(\.providerId) == ["github.com", "oidc.x"], "\(key)")
            let together = try #require(try await cached.signedIn(key, now: Fixtures.now))
            #expect(together.account?.disabled == false && together.links.count == 2)
        }
    }

    @Test("a signed-in read counts a cache hit only when session, account and links all come from memory")
    func signedInCountsHitsHonestly() async throws {
        let path = try StorageBackend.temporaryDatabasePath()
        let base = try SQLiteStorage(path: path)
        try await base.migrate()
        try await base.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await base.insertSession(Fixtures.session("s1", uid: "u1"))
        // An account without links, which the store's API never leaves behind (the last link
        // cannot be removed) but a transaction of another process may show for a moment: its
        // session is held, its links never are, so each of its reads goes to the store.
        try await base.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", federatedId: "2"))
        try await base.insertSession(Fixtures.session("s2", uid: "u2"))
        try await StorageBackend.otherConnection(path).write {
            try $0.execute(sql: "DELETE FROM provider_links WHERE uid = 'u2'")
        }
        let recorded = TestMetrics()
        let cached = CachedStore(base, capacity: 100, lifetime: 60, clock: OffsetClock(), metrics: GatehouseMetrics(factory: recorded))
        func lookups(_ result: String) -> Int64 {
            recorded.counterTotal(label: "gatehouse_cache_lookups_total", dimensions: [("cache", "account"), ("result", result)])
        }
        let orphan = SessionKey.cookieHash(SecureRandom.digest("s2"))
        #expect(try await cached.signedIn(orphan, now: Fixtures.now)?.links.isEmpty == true)
        #expect(try await cached.signedIn(orphan, now: Fixtures.now)?.links.isEmpty == true)
        #expect(lookups("miss") == 2 && lookups("hit") == 0)
        let whole = SessionKey.cookieHash(SecureRandom.digest("s1"))
        #expect(try await cached.signedIn(whole, now: Fixtures.now)?.account != nil)
        #expect(try await cached.signedIn(whole, now: Fixtures.now)?.account != nil)
        #expect(lookups("miss") == 3 && lookups("hit") == 1)
    }

    @Test(
        "a refresh token's reuse drops its own family from memory, no other account's: anyone holding a spent token can make one, and it must not send every signed-in read to the store"
    )
    func reuseDropsOnlyItsFamily() async throws {
        let (base, cached, _) = try await Self.seeded()
        _ = try await Self.reads(cached)
        try await base.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", federatedId: "2"))
        let other = Fixtures.session("s2", uid: "u2")
        try await base.insertSession(other)
        try await base.insertRefreshToken(tokenHash: "r2-1", familyId: other.familyId, at: Fixtures.now)
        #expect(try await cached.session(familyId: other.familyId, now: Fixtures.now) == other)
        #expect(try await cached.rotateRefreshToken(tokenHash: "r2-1", successor: .strict("r2-2"), now: Fixtures.now) == .rotated(other))
        // Behind the cache's back: u1's account as the store now has it, which a read that went
        // to the store would see.
        #expect(try await base.setDisabled(uid: "u1", disabled: true) == .changed)
        #expect(
            try await cached.rotateRefreshToken(tokenHash: "r2-1", successor: .strict("r2-3"), now: Fixtures.now)
                == .reused(familyId: other.familyId))
        #expect(try await cached.session(familyId: other.familyId, now: Fixtures.now) == nil, "the revoked family is read again")
        let kept = try await Self.reads(cached)
        #expect(kept.session != nil && kept.account?.disabled == false, "u1's entries are still answered from memory")
    }

    @Test("what was read is answered from memory: a change made behind the cache's back shows only once the lifetime has passed")
    func answersFromMemoryWithinItsLifetime() async throws {
        let (base, cached, clock) = try await Self.seeded()
        let first = try await Self.reads(cached)
        #expect(first.session != nil && first.family != nil && first.account?.disabled == false && first.links == ["github.com", "oidc.x"])
        // Behind its back (no instance does this: the point is to see where answers come from).
        #expect(try await base.setDisabled(uid: "u1", disabled: true) == .changed)
        let remembered = try await Self.reads(cached)
        #expect(remembered.session != nil && remembered.family != nil && remembered.account?.disabled == false)
        clock.advance(by: 60)
        let reread = try await Self.reads(cached)
        #expect(reread.session == nil && reread.family == nil && reread.account?.disabled == true)
    }

    @Test(
        "every write made through it is seen by the next read: sign-out by cookie or family, sign-out everywhere, disable, unlink, profile update, token replacement, account deletion"
    )
    func writesDropWhatTheyChange() async throws {
        let writes:
            [(String, @Sendable (CachedStore) async throws -> Void, @Sendable ((SessionRecord?, SessionRecord?, AccountRecord?, [String])) -> Bool)] =
                [
                    ("sign-out by cookie", { try await $0.deleteSession(idHash: SecureRandom.digest("s1")) }, { $0.0 == nil && $0.1 == nil }),
                    ("sign-out by family", { try await $0.deleteSession(familyId: "family-s1") }, { $0.0 == nil && $0.1 == nil }),
                    ("sign-out everywhere", { _ = try await $0.deleteSessions(uid: "u1", now: Fixtures.now) }, { $0.0 == nil && $0.1 == nil }),
                    ("disable", { _ = try await $0.setDisabled(uid: "u1", disabled: true) }, { $0.0 == nil && $0.2?.disabled == true }),
                    ("unlink", { _ = try await $0.deleteLink(uid: "u1", providerId: "oidc.x", sparing: nil) }, { $0.3 == ["github.com"] }),
                    ("account deletion", { _ = try await $0.deleteAccount(uid: "u1") }, { $0.0 == nil && $0.2 == nil && $0.3.isEmpty }),
                ]
        for (name, write, seen) in writes {
            let (_, cached, _) = try await Self.seeded()
            _ = try await Self.reads(cached)
            try await write(cached)
            #expect(seen(try await Self.reads(cached)), "\(name)")
        }
        // Profile snapshots and sealed tokens, as the links' readers see them.
        let (_, cached, _) = try await Self.seeded()
        _ = try await Self.reads(cached)
        try await cached.updateLinkProfile(
            providerId: "github.com", federatedId: "1", uid: "u1", profileJSON: Data(#"{"new":1}"#.utf8), verifiedEmail: nil, at: Fixtures.now)
        #expect(try await cached.links(uid: "u1").first?.profileJSON == Data(#"{"new":1}"#.utf8))
        #expect(try await cached.replaceSealedTokens(providerId: "github.com", federatedId: "1", expected: "v1.k.sealed", with: "v1.k.newer"))
        #expect(try await cached.links(uid: "u1").first?.sealedTokens == "v1.k.newer")
    }

    @Test(
        "several instances on PostgreSQL: a write on one reaches the others' caches through the change feed, long before their lifetime; with the change feed lost, nothing is answered from memory until it listens again",
        // A safety net against a hang, not a measure.
        .timeLimit(.minutes(10)))
    func changeFeedAcrossInstances() async throws {
        let instances = try await TwoInstances()
        defer { instances.shutdown() }
        let (a, cachedA, cachedB) = (instances.a, instances.cachedA, instances.cachedB)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await cachedA.followChanges() }
            group.addTask { await cachedB.followChanges() }
            defer { group.cancelAll() }

            /// Polls until `done` (at most `limit`, so that a slow answer is reported with its
            /// time rather than as a timeout); how long it took. 30 s: far less than the caches'
            /// ten minutes, so only the feed explains a change seen, and far more than a loaded
            /// 2-core run takes (milliseconds unloaded).
            func untilB(within limit: Duration = .seconds(30), _ done: () async throws -> Bool) async throws -> Duration {
                let start = ContinuousClock.now
                while try await !done() {
                    guard ContinuousClock.now - start < limit else { break }
                    try await Task.sleep(for: .milliseconds(5))
                }
                return ContinuousClock.now - start
            }
            // B remembers the session; A signs it out: B refuses it.
            try await a.insertSession(Fixtures.session("s1", uid: "u1"))
            _ = try await untilB { cachedB.answersFromMemory }
            #expect(cachedB.answersFromMemory, "B's change feed listens")
            #expect(try await cachedB.session(idHash: SecureRandom.digest("s1"), now: Fixtures.now) != nil)
            try await cachedA.deleteSession(idHash: SecureRandom.digest("s1"))
            let took = try await untilB { try await cachedB.session(idHash: SecureRandom.digest("s1"), now: Fixtures.now) == nil }
            #expect(took < .seconds(30), "sign-out reached B after \(took)")
            // Disabled on A: B sees it.
            #expect(try await cachedB.account(uid: "u1")?.disabled == false)
            #expect(try await cachedA.setDisabled(uid: "u1", disabled: true) == .changed)
            let disabled = try await untilB { try await cachedB.account(uid: "u1")?.disabled == true }
            #expect(disabled < .seconds(30), "disable reached B after \(disabled)")

            // B's listening connection is killed (a restart, a network cut): B stops answering
            // from memory as soon as it notices, so a change it cannot hear about is still seen.
            try await instances.killListeners()
            let off = try await untilB { !cachedB.answersFromMemory }
            #expect(off < .seconds(30), "B noticed the lost feed after \(off)")
            #expect(try await cachedA.setDisabled(uid: "u1", disabled: false) == .changed)
            #expect(try await cachedB.account(uid: "u1")?.disabled == false)
            _ = try await untilB { cachedB.answersFromMemory }
            #expect(cachedB.answersFromMemory, "B listens again")
            #expect(try await cachedB.account(uid: "u1")?.disabled == false)
        }
    }

    @Test(
        "the change feed's connections killed 40 times while both instances read and write: no request fails or waits out the operation timeout (a dying connection never goes back to the pool)",
        // A safety net, not a measure: forty relistens take about 95 s on a loaded run.
        .timeLimit(.minutes(10)))
    func lostFeedNeverLendsItsConnection() async throws {
        let instances = try await TwoInstances()
        defer { instances.shutdown() }
        let (a, b, cachedA, cachedB) = (instances.a, instances.b, instances.cachedA, instances.cachedB)
        let failures = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await cachedA.followChanges() }
            group.addTask { await cachedB.followChanges() }
            defer { group.cancelAll() }
            // How long a feed may take to listen again: its retries wait up to 2 s each, and on
            // a loaded 2-core run a reconnection has taken longer than 5 s.
            let relisten = Duration.seconds(20)
            /// Whether both listen, polled for at most `relisten`.
            func bothListen() async throws -> Bool {
                let start = ContinuousClock.now
                while !(cachedA.answersFromMemory && cachedB.answersFromMemory), ContinuousClock.now - start < relisten {
                    try await Task.sleep(for: .milliseconds(5))
                }
                return cachedA.answersFromMemory && cachedB.answersFromMemory
            }
            var failures: [String] = []
            for round in 0..<40 {
                // Both flags, and both backends listening: under load a flag can still be up
                // from before the last kill when its listener has not yet heard of it.
                let start = ContinuousClock.now
                while try await instances.listeningBackends() < 2, ContinuousClock.now - start < relisten {
                    try await Task.sleep(for: .milliseconds(5))
                }
                guard try await bothListen(), try await instances.listeningBackends() == 2 else {
                    failures.append("round \(round): the feeds did not listen again within \(relisten)")
                    break
                }
                // Requests on both pools before, during and after the kill: one of them is
                // waiting for a connection, or asks for one, when a listener's goes back.
                let load = Task { () -> [String] in
                    var errors: [String] = []
                    let start = ContinuousClock.now
                    while ContinuousClock.now - start < .milliseconds(60) {
                        do {
                            _ = try await b.account(uid: "u1")
                            _ = try await a.setDisabled(uid: "u1", disabled: false)
                        } catch {
                            errors.append("round \(round): \(error)")
                        }
                    }
                    return errors
                }
                try await Task.sleep(for: .milliseconds(10))
                // Each round cuts both feeds, which listened before it.
                let killed = try await instances.killListeners()
                if killed < 2 { failures.append("round \(round): \(killed) listening backends terminated, not both") }
                failures += await load.value
            }
            return failures
        }
        #expect(failures.isEmpty, "\(failures)")
    }
}

/// Two instances on one fresh PostgreSQL database holding account `u1`, each store with a
/// cache over it (one clock for both), and a connection of the test's own that can terminate
/// their listening backends (a restart, a network cut).
struct TwoInstances {
    /// The stores of instance A and B.
    let a: PostgresStorage, b: PostgresStorage
    /// Their caches, which follow the change feed once a test runs `followChanges()`.
    let cachedA: CachedStore, cachedB: CachedStore
    /// The test's own connection pool, and the task that runs it.
    let killer: PostgresClient, runner: Task<Void, Never>

    /// Migrates a new database and creates `u1` through A. The stores keep the production 5 s
    /// operation timeout: the kill test checks that no request waits it out.
    init() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let logger = PostgresTestServer.quietLogger
        // No periodic `SELECT 1` on the feeds' connections (ChangeFeedTests covers it): it
        // would replace LISTEN as their backends' last query, by which `listeningBackends` and
        // `killListeners` find them, so a feed up for longer than the check's interval (a round
        // that waits for the other feed) would no longer count as listening.
        (a, b) = (
            try PostgresStorage(url: url, maximumConnections: 3, feedCheckInterval: .seconds(3600), logger: logger),
            try PostgresStorage(url: url, maximumConnections: 3, feedCheckInterval: .seconds(3600), logger: logger)
        )
        let clock = OffsetClock()
        (cachedA, cachedB) = (
            CachedStore(a, capacity: 100, lifetime: 600, clock: clock, logger: logger),
            CachedStore(b, capacity: 100, lifetime: 600, clock: clock, logger: logger)
        )
        try await a.migrate()
        try await a.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        // Started last, so that a failure above leaves no pool running.
        let killer = PostgresClient(configuration: try DatabaseURL.configuration(url, maximumConnections: 1), backgroundLogger: logger)
        self.killer = killer
        runner = Task { await killer.run() }
    }

    /// How many of the stores' backends are listening: their last statement the `LISTEN`, or the
    /// feed's check that follows it every 10 s (matched by `LISTEN` alone, a feed that had just
    /// checked went uncounted and unkilled).
    func listeningBackends() async throws -> Int {
        let rows = try await killer.query(
            "SELECT count(*)::int FROM pg_stat_activity WHERE (query LIKE 'LISTEN%' OR query = 'SELECT 1 AS gatehouse_change_feed') AND datname = current_database() AND pid <> pg_backend_pid()",
            logger: PostgresTestServer.quietLogger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Terminates every listening backend of the database; how many it terminated.
    @discardableResult
    func killListeners() async throws -> Int {
        let rows = try await killer.query(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int FROM pg_stat_activity WHERE (query LIKE 'LISTEN%' OR query = 'SELECT 1 AS gatehouse_change_feed') AND datname = current_database() AND pid <> pg_backend_pid()",
            logger: PostgresTestServer.quietLogger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Ends both stores' pools and the test's own.
    func shutdown() {
        runner.cancel()
        a.shutdown()
        b.shutdown()
    }
}
