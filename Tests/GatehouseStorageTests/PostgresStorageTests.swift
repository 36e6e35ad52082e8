import Foundation
@_spi(Testing) import GatehouseCore
import GatehouseTestSupport
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import GatehousePostgres

/// What only the PostgreSQL store has: several instances migrating at once, a database of the
/// first schema upgraded, a database from a newer version, a server restart, database URLs.
@Suite struct PostgresStorageTests {
    @Test("eight instances migrating one database at once: each migration applied exactly once, then every store works")
    func concurrentMigrations() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let stores = try (0..<8).map { _ in try PostgresTestServer.store(url) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for store in stores { group.addTask { try await store.migrate() } }
            try await group.waitForAll()
        }
        try await stores[0].insertServiceKey(ServiceKeyRecord(id: "sk_1", name: "n", secretHash: "h", scopes: ["admin"], createdAt: Date()))
        for store in stores { #expect(try await store.serviceKeys().map(\.id) == ["sk_1"]) }
        for store in stores { store.shutdown() }
    }

    @Test(
        "a migration whose table a long transaction holds waits for its lock a bounded time, then rolls back and tries again: the writes queued behind it go on, the migration before it is committed, and it is applied once the table is free"
    )
    func aMigrationDoesNotHoldWritesBehindALongTransaction() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let store = try PostgresTestServer.store(url)
        defer { store.shutdown() }
        try await store.migrate()
        // The next version's two migrations, the second altering a table that sign-ins write.
        let next =
            PostgresMigrations.all + [
                PostgresMigrations.Migration(version: "v-next-sessions", statements: ["ALTER TABLE sessions ADD COLUMN next_probe integer"]),
                PostgresMigrations.Migration(version: "v-next", statements: ["ALTER TABLE webhook_outbox ADD COLUMN next_probe integer"]),
            ]
        func insert(_ id: String) -> String {
            """
            INSERT INTO webhook_outbox (id, event_id, endpoint, type, payload, created_at, next_attempt_at)
            VALUES ('\(id).app', '\(id)', 'app', 'account.created', '\\x7b7d', now(), now())
            """
        }
        let log = PostgresTestServer.quietLogger
        try await PostgresTestServer.withSession(url) { holder in
            // A long transaction that read the table (a report, a backup's snapshot) holds it.
            try await holder.query("BEGIN", logger: log)
            try await holder.query("SELECT count(*) FROM webhook_outbox", logger: log)
            let migrating = Task {
                try await PostgresMigrations.migrate(
                    store.client, migrations: next, lockWait: .milliseconds(300), lockRetryPause: .milliseconds(300), logger: log)
            }
            defer { migrating.cancel() }
            // The migration's ALTER waits for the table (in the lock queue).
            var queued = false
            for _ in 0..<3000 where !queued {
                queued =
                    try await PostgresTestServer.count(
                        url, table: "pg_locks",
                        where:
                            "NOT granted AND relation = 'webhook_outbox'::regclass AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                    ) > 0
                if !queued { try await Task.sleep(for: .milliseconds(10)) }
            }
            try #require(queued, "the migration never waited for the table")
            // Each migration commits on its own: the first holds nothing while the second waits.
            #expect(try await PostgresTestServer.count(url, table: "gatehouse_migrations", where: "version = 'v-next-sessions'") == 1)
            // A write the serving instances make meanwhile goes through, within its own 20 s
            // (without a lock wait, it would wait for the long transaction, which never ends first).
            let failure: String? = try await PostgresTestServer.withSession(url) { writer in
                try await writer.query("SET statement_timeout = '20s'", logger: log)
                do {
                    try await writer.query(PostgresQuery(unsafeSQL: insert("e1")), logger: log)
                    return nil
                } catch {
                    return String(reflecting: error)
                }
            }
            #expect(failure == nil, "the write waited behind the migration")
            try await holder.query("COMMIT", logger: log)
            try await migrating.value
        }
        #expect(try await PostgresTestServer.count(url, table: "gatehouse_migrations", where: "version = 'v-next'") == 1)
        try await PostgresTestServer.execute(url, "UPDATE webhook_outbox SET next_probe = 1")
        #expect(try await PostgresTestServer.count(url, table: "webhook_outbox", where: "next_probe = 1") == 1)
    }

    @Test("a start that finds every migration applied takes no migration lock: it does not wait for an instance that holds it")
    func aMigratedDatabaseTakesNoLock() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let store = try PostgresTestServer.store(url)
        defer { store.shutdown() }
        try await store.migrate()
        let starting = try PostgresTestServer.store(url)
        defer { starting.shutdown() }
        let log = PostgresTestServer.quietLogger
        try await PostgresTestServer.withSession(url) { holder in
            // An instance holding the lock (migrating, or behind a pooler that kept it).
            for try await _ in try await holder.query("SELECT pg_advisory_lock(\(PostgresMigrations.lockKey))", logger: log) {}
            let started = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await starting.migrate()
                    return true
                }
                // Well past a migrated database's checks on a loaded machine.
                group.addTask {
                    try await Task.sleep(for: .seconds(30))
                    return false
                }
                let first = try await group.next() ?? false
                group.cancelAll()
                return first
            }
            #expect(started, "the start waited for the migration lock with nothing to apply")
        }
    }

    @Test("a session an older version wrote, without the time its user authenticated, counts from its sign-in")
    func aSessionWithoutItsAuthenticationTime() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let store = try PostgresTestServer.store(url)
        defer { store.shutdown() }
        try await store.migrate()
        try await store.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        var session = Fixtures.session("s", uid: "u1")
        session.authenticatedAt = session.createdAt.addingTimeInterval(-600)
        try await store.insertSession(session)
        try await PostgresTestServer.execute(url, "UPDATE sessions SET authenticated_at = NULL")
        let read = try #require(try await store.session(idHash: session.idHash, now: Fixtures.now))
        #expect(read.authenticatedAt == session.createdAt)
        #expect(try await store.signedIn(.cookieHash(session.idHash), now: Fixtures.now)?.session.authenticatedAt == session.createdAt)
    }

    @Test(
        "a database of the first schema migrates whole: its links' verified emails come out as new links' would, so one account per email holds for them"
    )
    func upgradeFromTheFirstSchema() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        // The first schema as its version left it, with a link per email as providers sent them.
        for statement in PostgresMigrations.all[0].statements { try await PostgresTestServer.execute(url, statement) }
        try await PostgresTestServer.execute(
            url, "CREATE TABLE gatehouse_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        try await PostgresTestServer.execute(url, "INSERT INTO gatehouse_migrations (version) VALUES ('v1-initial')")
        let emails: [(uid: String, email: String, verified: Bool)] = [
            ("u1", " JOSÉ@Example.COM ", true), ("u2", "\tann@example.com\n", true), ("u3", "two@at@example.com", true),
            ("u4", "Zoë@example.com", false), ("u5", "plain@example.com", true),
        ]
        for (uid, email, verified) in emails {
            let snapshot = try ProfileSnapshot.encode(
                ProviderProfile(providerId: "github.com", federatedId: uid, email: email, emailVerified: verified))
            let hex = snapshot.map { String(format: "%02x", $0) }.joined()
            try await PostgresTestServer.execute(url, "INSERT INTO accounts (uid, created_at, last_sign_in_at) VALUES ('\(uid)', now(), now())")
            try await PostgresTestServer.execute(
                url,
                """
                INSERT INTO provider_links (uid, provider_id, federated_id, profile_json, sealed_tokens, linked_at, updated_at)
                VALUES ('\(uid)', 'github.com', '\(uid)', decode('\(hex)', 'hex'), 'v1.k.sealed', now(), now())
                """)
        }
        let store = try PostgresTestServer.store(url)
        defer { store.shutdown() }
        try await store.migrate()
        for (uid, email, verified) in emails {
            let link = try #require(try await store.link(providerId: "github.com", federatedId: uid))
            let expected = verified ? EmailAddress.normalized(email) : nil
            #expect(link.verifiedEmail == expected, "\(uid)")
            if let expected { #expect(try await store.uids(verifiedEmail: expected, limit: 2) == [uid], "\(uid)") }
        }
        // The upgraded links work like new ones: the account signs in and keeps its links.
        #expect(try await store.links(uid: "u1").map(\.federatedId) == ["u1"])
    }

    @Test("locks hold no pooled connection: with a pool of 2, four holders of different locks each query inside; a dead holder's lease ends")
    func locksDoNotStarveThePool() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let store = try PostgresStorage(
            url: url, maximumConnections: 2, operationTimeout: .seconds(3), lockLease: .seconds(2), logger: PostgresTestServer.quietLogger)
        defer { store.shutdown() }
        try await store.migrate()
        try await store.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        // Each holder keeps its lock over a slow call (a provider's token endpoint) and needs the
        // store meanwhile. With a connection per held lock, the two connections went to the first
        // two holders, whose queries then waited for a third until the operation timeout.
        let found = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<4 {
                group.addTask {
                    try await store.withLock("refresh|user-\(index)") {
                        try await Task.sleep(for: .milliseconds(200))
                        return try await store.account(uid: "u1") != nil
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(found == [true, true, true, true])

        // A holder that died without releasing (its row, with no process renewing it): its
        // lease ends, then the lock is free again.
        let waited = ContinuousClock.now  // before the lease begins: its whole 1.5 s lie ahead
        try await PostgresTestServer.execute(
            url, "INSERT INTO gatehouse_locks (name, holder, expires_at) VALUES ('left-behind', 'gone', now() + interval '1500 milliseconds')")
        _ = try await store.withLock("left-behind") { true }
        #expect(ContinuousClock.now - waited >= .seconds(1), "the lock was taken while its lease lasted")
    }

    @Test("a write still waiting at the operation timeout answers unavailable and never commits afterwards: a 503 means nothing was written")
    func timedOutWriteNeverCommits() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        // A pool of one: a read after the abandoned write runs once that write's transaction ended.
        let store = try PostgresStorage(url: url, maximumConnections: 1, operationTimeout: .seconds(2), logger: PostgresTestServer.quietLogger)
        defer { store.shutdown() }
        try await store.migrate()
        try await store.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await PostgresTestServer.withSession(url) { connection in
            // Another session holds the account's row (a slow migration, a long transaction):
            // the delete waits for it past the store's timeout.
            try await connection.query("BEGIN", logger: PostgresTestServer.quietLogger)
            try await connection.query("SELECT uid FROM accounts WHERE uid = 'u1' FOR UPDATE", logger: PostgresTestServer.quietLogger)
            await #expect(throws: StorageError.unavailable) { _ = try await store.deleteAccount(uid: "u1") }
            try await connection.query("COMMIT", logger: PostgresTestServer.quietLogger)
        }
        #expect(try await store.account(uid: "u1") != nil, "the delete answered unavailable, then committed")
        #expect(try await store.links(uid: "u1").count == 1)
    }

    /// A write of one statement, the row it waits for, and whether it was written.
    struct SingleWrite: Sendable, CustomTestStringConvertible {
        /// What it writes, as the test's argument reads.
        let name: String
        /// The statement another session holds the row with.
        let lock: String
        /// The write, through the store.
        let write: @Sendable (PostgresStorage) async throws -> Void
        /// Whether the store holds what the write wrote.
        let written: @Sendable (PostgresStorage) async throws -> Bool
        /// `name`.
        var testDescription: String { name }

        /// The writes the test tries: an update, a delete and a take.
        static let all = [
            SingleWrite(
                name: "a service key's revocation (UPDATE … RETURNING)", lock: "SELECT id FROM service_keys FOR UPDATE",
                write: { _ = try await $0.revokeServiceKey(id: "sk_1", at: Fixtures.now) },
                written: { try await $0.serviceKeys().first?.revokedAt != nil }),
            SingleWrite(
                name: "ending an account's sessions (DELETE)", lock: "SELECT id_hash FROM sessions FOR UPDATE",
                write: { _ = try await $0.deleteSessions(uid: "u1", now: Fixtures.now) },
                written: { try await $0.sessionCount(uid: "u1", now: Fixtures.now) == 0 }),
            SingleWrite(
                name: "taking a sign-in's state (DELETE … RETURNING)", lock: "SELECT state_hash FROM signin_transactions FOR UPDATE",
                write: { store in
                    let transaction = Fixtures.transaction()
                    _ = try await store.takeTransaction(stateHash: transaction.stateHash, bindingHash: transaction.bindingHash)
                },
                written: { store in
                    let transaction = Fixtures.transaction()
                    return try await store.takeTransaction(stateHash: transaction.stateHash, bindingHash: transaction.bindingHash) == nil
                }),
        ]
    }

    /// A migrated store on `url` whose operations time out after 2 s, holding a row of each
    /// kind `SingleWrite.all` writes: an account with a session, a service key, a sign-in's state.
    static func storeForSingleWrites(_ url: String, maximumConnections: Int) async throws -> PostgresStorage {
        let store = try PostgresStorage(
            url: url, maximumConnections: maximumConnections, operationTimeout: .seconds(2), logger: PostgresTestServer.quietLogger)
        do {
            try await store.migrate()
            try await store.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
            try await store.insertServiceKey(ServiceKeyRecord(id: "sk_1", name: "n", secretHash: "h", scopes: ["admin"], createdAt: Fixtures.now))
            try await store.insertSession(Fixtures.session("s", uid: "u1"))
            try await store.insertTransaction(Fixtures.transaction())
        } catch {
            store.shutdown()
            throw error
        }
        return store
    }

    @Test(
        "a single statement waiting for a row past the timeout is answered unavailable in bounded time and never completes afterwards",
        arguments: SingleWrite.all)
    func timedOutStatementNeverCompletes(_ write: SingleWrite) async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let store = try await Self.storeForSingleWrites(url, maximumConnections: 2)
        defer { store.shutdown() }
        let answer = try await PostgresTestServer.withSession(url) { connection in
            try await connection.query("BEGIN", logger: PostgresTestServer.quietLogger)
            try await connection.query(PostgresQuery(unsafeSQL: write.lock), logger: PostgresTestServer.quietLogger)
            // The row stays held until the write was answered, or for 20 s (a write that waits
            // for the row is answered only once it is released).
            let answer = await Self.firstOf({ try await write.write(store) }, orAfter: .seconds(20))
            try await connection.query("COMMIT", logger: PostgresTestServer.quietLogger)
            return answer
        }
        #expect(answer == "unavailable", "answered before the row was released")
        // The write's connection has its answer from the server once the pool hands it out again.
        try await store.ping(within: nil)
        try await store.ping(within: nil)
        #expect(try await !write.written(store), "answered unavailable, then written")
    }

    @Test(
        "a single statement still waiting for a connection at the timeout is answered unavailable and never sent once one is free",
        arguments: SingleWrite.all)
    func timedOutStatementIsNeverSent(_ write: SingleWrite) async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let store = try await Self.storeForSingleWrites(url, maximumConnections: 1)
        defer { store.shutdown() }
        let (answer, census) = try await PostgresTestServer.withSession(url) { connection in
            // The census of sealed values (six timeouts: 12 s) holds the pool's one connection
            // while it waits for the links table another session holds.
            try await connection.query("BEGIN", logger: PostgresTestServer.quietLogger)
            try await connection.query("LOCK TABLE provider_links IN ACCESS EXCLUSIVE MODE", logger: PostgresTestServer.quietLogger)
            let census = Task { await Self.firstOf({ _ = try await store.sealingKeyUsage(now: Fixtures.now) }, orAfter: .seconds(30)) }
            var waiting = 0
            for _ in 0..<400 where waiting == 0 {
                let rows = try await connection.query(
                    "SELECT count(*)::int FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
                    logger: PostgresTestServer.quietLogger)
                for try await count in rows.decode(Int.self) { waiting = count }
                if waiting == 0 { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(waiting == 1, "the census holds the connection")
            let answer = await Self.firstOf({ try await write.write(store) }, orAfter: .seconds(20))
            // The connection is free again once the census has the table.
            try await connection.query("COMMIT", logger: PostgresTestServer.quietLogger)
            return (answer, await census.value)
        }
        #expect(answer == "unavailable", "answered before a connection was free")
        #expect(census == "done")
        try await store.ping(within: nil)
        try await store.ping(within: nil)
        #expect(try await !write.written(store), "answered unavailable, then sent once a connection was free")
    }

    @Test(
        "whole-table reads are bounded: two a caller can ask for run at a time (a third is unavailable at once), the census of sealed values besides them; each ends within six operation timeouts"
    )
    func scansAreBounded() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        // Set up through a store with the test server's timeouts: a loaded machine took more
        // than the 1 s under test to write the account.
        let setup = try PostgresTestServer.store(url)
        try await setup.migrate()
        try await setup.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        setup.shutdown()
        let store = try PostgresStorage(url: url, maximumConnections: 4, operationTimeout: .seconds(1), logger: PostgresTestServer.quietLogger)
        defer { store.shutdown() }
        @Sendable func running(_ count: Int) async throws -> Int {
            for _ in 0..<400 where store.scans.withLock({ $0 }) < count { try await Task.sleep(for: .milliseconds(10)) }
            return store.scans.withLock { $0 }
        }
        let (ended, besides, withCensus) = try await PostgresTestServer.withSession(url) { connection in
            // Another session holds the links table (a migration rewriting it, say): every
            // scan of it waits, each until its limit (6 s).
            try await connection.query("BEGIN", logger: PostgresTestServer.quietLogger)
            try await connection.query("LOCK TABLE provider_links IN ACCESS EXCLUSIVE MODE", logger: PostgresTestServer.quietLogger)
            let searches = (0..<2).map { _ in
                Task { await Self.firstOf({ _ = try await store.searchAccounts(.text("pat"), after: nil, limit: 5) }, orAfter: .seconds(30)) }
            }
            #expect(try await running(2) == 2)
            await #expect(throws: StorageError.unavailable) { _ = try await store.uids(email: "pat@example.com", limit: 5) }
            // Refused at once: the two still wait for the table (an admitted third would have
            // waited as long as they do).
            let besides = store.scans.withLock { $0 }
            let census = Task { await Self.firstOf({ _ = try await store.sealingKeyUsage(now: Fixtures.now) }, orAfter: .seconds(30)) }
            let withCensus = try await running(3)
            var ended: [String] = []
            for search in searches + [census] { ended.append(await search.value) }
            try await connection.query("COMMIT", logger: PostgresTestServer.quietLogger)
            return (ended, besides, withCensus)
        }
        #expect(besides == 2, "the third was refused while the two still ran")
        #expect(withCensus == 3, "the census is not held back by them")
        #expect(ended == ["unavailable", "unavailable", "unavailable"], "each ended within its limit, before the table was released")
        // The table released, the store searches again (within its 1 s: tried a few times on a
        // loaded machine).
        var found: [String]?
        for _ in 0..<10 where found == nil { found = try? await store.searchAccounts(.text("1"), after: nil, limit: 5) }
        #expect(found == ["u1"])
    }

    /// How `operation` ended (`"done"`, `"unavailable"`, another error's description), or
    /// `"no answer"` when it had not after `limit` (it is left running: the caller may have to
    /// release what it waits for).
    static func firstOf(_ operation: @escaping @Sendable () async throws -> Void, orAfter limit: Duration) async -> String {
        let ended = Mutex<String?>(nil)
        Task {
            let outcome: String
            do {
                try await operation()
                outcome = "done"
            } catch StorageError.unavailable {
                outcome = "unavailable"
            } catch {
                outcome = "\(error)"
            }
            ended.withLock { $0 = outcome }
        }
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let outcome = ended.withLock({ $0 }) { return outcome }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return ended.withLock { $0 } ?? "no answer"
    }

    @Test(
        "the purge and the retention jobs work through a backlog larger than their batch, one short statement a batch (transactions, sessions, their uses, ended retry windows, audit events, webhook entries), and leave what has not expired"
    )
    func purgeWorksInBatches() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let store = PostgresStorage(
            configuration: try DatabaseURL.configuration(url, maximumConnections: 2), logger: PostgresTestServer.quietLogger, purgeBatch: 2)
        defer { store.shutdown() }
        try await store.migrate()
        try await store.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let stale = (0..<5).map { Fixtures.transaction(state: "stale-\($0)", expiresIn: -1) }
        for transaction in stale { try await store.insertTransaction(transaction) }
        let live = Fixtures.transaction(state: "live")
        try await store.insertTransaction(live)
        for index in 0..<5 {
            try await store.insertSession(Fixtures.session("stale-\(index)", uid: "u1", expiresIn: -1))
            try await store.recordSessionUse(
                familyId: "family-stale-\(index)", SessionUse(at: Fixtures.now, clientAddress: "127.0.0.1", userAgent: nil))
        }
        // Live sessions whose last rotation's retry window has ended: the windows are cleared.
        for index in 0..<5 {
            try await store.insertSession(Fixtures.session("rotated-\(index)", uid: "u1"))
            try await store.insertRefreshToken(tokenHash: "r\(index)", familyId: "family-rotated-\(index)", at: Fixtures.now)
            _ = try await store.rotateRefreshToken(
                tokenHash: "r\(index)",
                successor: RefreshSuccessor(
                    tokenHash: "s\(index)", sealedToken: "sealed", retryUntil: Fixtures.now.addingTimeInterval(-1), familyLimit: .max),
                now: Fixtures.now)
        }
        try await store.insertSession(Fixtures.session("live", uid: "u1"))
        try await store.recordSessionUse(familyId: "family-live", SessionUse(at: Fixtures.now, clientAddress: "127.0.0.1", userAgent: nil))
        try await store.purgeExpired(now: Fixtures.now)
        @Sendable func count(_ sql: String) async throws -> Int {
            var total = -1
            for value in try await store.query(PostgresQuery(unsafeSQL: sql), logger: PostgresTestServer.quietLogger).decode(Int.self) {
                total = value
            }
            return total
        }
        #expect(try await count("SELECT count(*)::int FROM refresh_tokens WHERE retry_until IS NOT NULL") == 0, "every ended window cleared")
        #expect(try await count("SELECT count(*)::int FROM refresh_tokens") == 10, "the tokens stay")
        #expect(try await count("SELECT count(*)::int FROM session_uses") == 1, "only the live session's use is left")
        for transaction in stale {
            #expect(try await store.takeTransaction(stateHash: transaction.stateHash, bindingHash: transaction.bindingHash) == nil)
        }
        #expect(try await store.takeTransaction(stateHash: live.stateHash, bindingHash: live.bindingHash) == live)
        #expect(try await store.sessionCount(uid: "u1", now: Fixtures.now.addingTimeInterval(-3600)) == 6, "only the live sessions are left")
        try await store.appendAudit((0..<6).map { AuditRecord(at: Fixtures.now.addingTimeInterval(Double($0)), event: "e\($0)", actor: "a") })
        #expect(try await store.dropAudit(before: Fixtures.now.addingTimeInterval(5)) == 5)
        #expect(try await store.auditRecords(uid: nil, event: nil, before: nil, limit: 10).map(\.event) == ["e5"])
        let outbox = (0..<5).map {
            OutboxEntry(
                eventId: "e\($0)", endpoint: "app", type: "account.disabled", payload: Data("{}".utf8),
                createdAt: Fixtures.now.addingTimeInterval(-60))
        }
        _ = try await Outbox.$entries.withValue(outbox) { try await store.setDisabled(uid: "u1", disabled: true) }
        #expect(try await store.dropOutbox(writtenBefore: Fixtures.now, now: Fixtures.now) == ["app": 5])
    }

    @Test("a live holder keeps its lock past the lease: the lease is renewed while the body runs, and freed when it ends")
    func liveHolderRenewsItsLease() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let store = try PostgresStorage(
            url: url, maximumConnections: 2, operationTimeout: .seconds(3), lockLease: .seconds(3), logger: PostgresTestServer.quietLogger)
        defer { store.shutdown() }
        try await store.migrate()
        let other = try PostgresStorage(
            url: url, maximumConnections: 1, operationTimeout: .seconds(3), lockWait: .milliseconds(500),
            logger: PostgresTestServer.quietLogger)
        defer { other.shutdown() }
        // A body slower than the lease (a provider's token call under a long timeout): another
        // instance asking once the first lease would have ended must still wait.
        let refused = try await store.withLock("refresh|slow") {
            try await Task.sleep(for: .seconds(4.5))
            do {
                _ = try await other.withLock("refresh|slow") { true }
                return false
            } catch StorageError.unavailable {
                return true
            }
        }
        #expect(refused, "another instance took the lock while its holder was still inside")
        // Released at the end, renewals stopped: the other instance takes it at once.
        _ = try await other.withLock("refresh|slow") { true }  // no wait to give up on: taken at once
    }

    @Test(
        "a holder whose lease another took stops renewing it, says so, and leaves the other's lease in place when it ends; a waiter cancelled leaves no lease behind"
    )
    func lostLeaseAndCancelledWaiter() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let records = LogRecords()
        let store = try PostgresStorage(
            url: url, maximumConnections: 2, operationTimeout: .seconds(3), lockLease: .milliseconds(900),
            logger: Logger(label: "locks") { _ in records.handler })
        defer { store.shutdown() }
        try await store.migrate()
        let lost = "lock lease lost before its holder finished lock=refresh|lost"
        try await store.withLock("refresh|lost") {
            // The lease ran out while the database was away, and another instance took the lock.
            try await PostgresTestServer.execute(url, "UPDATE gatehouse_locks SET holder = 'other', expires_at = now() + interval '1 hour'")
            for _ in 0..<200 where !records.messages.contains(lost) { try await Task.sleep(for: .milliseconds(50)) }
            // Three more renewal turns (a third of the lease each): none is tried, none is logged.
            try await Task.sleep(for: .milliseconds(900))
        }
        let warnings = records.messages.filter { $0 == lost }
        #expect(warnings.count == 1, "\(records.messages)")
        // The holder's release is its own lease's: the other holder keeps the lock.
        #expect(try await PostgresTestServer.count(url, table: "gatehouse_locks", where: "name = 'refresh|lost' AND holder = 'other'") == 1)

        // A waiter cancelled while the lock is held leaves no lease of its own.
        try await PostgresTestServer.execute(
            url, "INSERT INTO gatehouse_locks (name, holder, expires_at) VALUES ('refresh|held', 'other', now() + interval '1 hour')")
        let waiter = Task { try await store.withLock("refresh|held") { true } }
        try await Task.sleep(for: .milliseconds(200))
        waiter.cancel()
        await #expect(throws: (any Error).self) { try await waiter.value }
        #expect(try await PostgresTestServer.count(url, table: "gatehouse_locks") == 2)
    }

    @Test("byte-order paging (accounts, links, the webhook outbox) is served by an index in that order, not a sort of the table")
    func pagingUsesByteOrderIndexes() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let storage = try PostgresTestServer.store(url, maximumConnections: 1)
        try await storage.migrate()
        storage.shutdown()
        // The orders and conditions of `searchAccounts`, `links(after:limit:)` and `outboxEntries`.
        let pages = [
            ("accounts_uid_bytes", #"SELECT a.uid FROM accounts a WHERE a.uid COLLATE "C" > 'u1' ORDER BY a.uid COLLATE "C" LIMIT 50"#),
            (
                "provider_links_bytes",
                #"SELECT * FROM provider_links WHERE (provider_id COLLATE "C", federated_id COLLATE "C") > ('github.com', '1') ORDER BY provider_id COLLATE "C", federated_id COLLATE "C" LIMIT 100"#
            ),
            (
                "webhook_outbox_status_id_bytes",
                #"SELECT * FROM webhook_outbox WHERE status = 'failed' AND id COLLATE "C" > '' ORDER BY id COLLATE "C" LIMIT 50"#
            ),
        ]
        for (index, sql) in pages {
            let plan = try await PostgresTestServer.plan(url, sql)
            #expect(plan.contains(index), "\(plan)")
            #expect(!plan.contains("Sort"), "\(plan)")
        }
    }

    @Test(
        "each batch of the purge finds expired rows through an index on their time, never by reading a whole table, but for the uses of the live sessions and the locks"
    )
    func purgeUsesIndexes() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let storage = try PostgresTestServer.store(url, maximumConnections: 1)
        try await storage.migrate()
        storage.shutdown()
        let timed = PostgresStorage.purgeStatements.dropLast(2)
        #expect(timed.count == 6)
        for statement in timed {
            let query = statement(Date(timeIntervalSince1970: 1_800_000_000), 500)
            let plan = try await PostgresTestServer.plan(url, query)
            #expect(!plan.contains("Seq Scan"), "\(query.sql)\n\(plan)")
        }
    }

    @Test("an endpoint's claim of due webhook entries is served by an index on its endpoint, not a read past other endpoints' entries")
    func outboxClaimUsesTheEndpointIndex() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let storage = try PostgresTestServer.store(url, maximumConnections: 1)
        try await storage.migrate()
        storage.shutdown()
        // The condition and order of `claimOutbox`.
        let plan = try await PostgresTestServer.plan(
            url,
            """
            SELECT id FROM webhook_outbox
            WHERE endpoint = 'app' AND status = 'pending' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until <= now())
            ORDER BY next_attempt_at LIMIT 8 FOR UPDATE SKIP LOCKED
            """)
        #expect(plan.contains("webhook_outbox_endpoint_due"), "\(plan)")
        #expect(!plan.contains("Sort"), "\(plan)")
    }

    @Test(
        "a webhook entry's lease runs on the database's clock: an instance whose clock runs two hours ahead, longer than the lease, neither claims, redelivers nor drops an entry another instance is delivering"
    )
    func webhookLeasesRunOnTheDatabasesClock() async throws {
        let at = Fixtures.now
        // Further ahead than the lease (an hour) lasts: judged by the callers' clocks, it has run out.
        let ahead = at.addingTimeInterval(2 * 3600)
        let others: [(String, @Sendable (any GatehouseStorage, OutboxEntry) async throws -> Bool)] = [
            (
                "claimed",
                { storage, _ in !(try await storage.claimOutbox(endpoint: "app", now: ahead, lease: OutboxLease(duration: 3600), limit: 8).isEmpty) }
            ),
            ("redelivered", { storage, entry in try await storage.redeliverOutbox(id: entry.id, now: ahead) }),
            ("dropped", { storage, _ in !(try await storage.dropOutbox(writtenBefore: ahead, now: ahead).isEmpty) }),
        ]
        for (what, other) in others {
            let (storage, entry) = try await WebhookStoreConformanceTests.storeWithOneEntry(.postgres)
            defer { (storage as? PostgresStorage)?.shutdown() }
            #expect(try await storage.claimOutbox(endpoint: "app", now: at, lease: OutboxLease(duration: 3600), limit: 8).map(\.id) == [entry.id])
            #expect(try await other(storage, entry) == false, "\(what) by the instance whose clock runs ahead")
            #expect(try await storage.outboxEntries(status: .pending, after: nil, limit: 10).map(\.id) == [entry.id], "\(what)")
        }
    }

    @Test(
        "during a rolling upgrade, an older instance's claim of an entry (its own lease, no claim id) is not taken over by the late outcome of a newer instance's lapsed claim"
    )
    func anOlderInstancesClaimIsNotTakenOver() async throws {
        let outcomes: [DeliveryOutcome] = [
            .failed(status: 500, error: "late"), .retry(at: Fixtures.now, status: 503, error: "late"),
            .postponed(until: Fixtures.now, error: "late"),
        ]
        for outcome in outcomes {
            let (stored, entry) = try await WebhookStoreConformanceTests.storeWithOneEntry(.postgres)
            let storage = try #require(stored as? PostgresStorage)
            defer { storage.shutdown() }
            // A newer instance's claim lapses (here at once) before its outcome arrives.
            let lapsed = OutboxLease(duration: 0)
            #expect(try await storage.claimOutbox(endpoint: "app", now: Fixtures.now, lease: lapsed, limit: 8).map(\.id) == [entry.id])
            // An older instance claims the entry as its version's SQL does: a lease on its own
            // clock, and no claim id.
            try await storage.execute("UPDATE webhook_outbox SET lease_until = now() + interval '1 hour' WHERE id = \(entry.id)")
            // The lapsed claim's outcome is not recorded: the older instance holds the entry.
            try await storage.completeOutbox(id: entry.id, lease: lapsed, outcome: outcome)
            let listed = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
            #expect(listed.map(\.attempts) == [0] && listed.map(\.lastError) == [nil], "\(outcome): \(listed)")
            #expect(try await storage.claimOutbox(endpoint: "app", now: Fixtures.now, lease: OutboxLease(duration: 3600), limit: 8).isEmpty)
        }
    }

    @Test("a database migrated by a newer Gatehouse is refused with a clear error")
    func newerSchemaIsRefused() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let store = try PostgresTestServer.store(url)
        try await store.migrate()
        try await PostgresTestServer.execute(url, "INSERT INTO gatehouse_migrations (version) VALUES ('v999-from-the-future')")
        let error = await #expect(throws: PostgresStorageError.self) { try await store.migrate() }
        #expect(
            error?.description
                == "the database has migrations this Gatehouse does not know (v999-from-the-future): it was migrated by a newer version")
        store.shutdown()
    }

    @Test("a migration the server refuses says the server's SQLSTATE and message, not postgres-nio's wrapper")
    func refusedMigrationSaysWhy() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        // A role that may connect but not create tables in the public schema.
        let role = "gatehouse_reader_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        try await PostgresTestServer.execute(url, "CREATE ROLE \(role) LOGIN")
        // PostgreSQL 15's default; older servers let everyone create in the public schema.
        try await PostgresTestServer.execute(url, "REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        var components = try #require(URLComponents(string: url))
        components.user = role
        components.password = nil
        let store = try PostgresTestServer.store(try #require(components.string))
        defer { store.shutdown() }
        let error = await #expect(throws: PostgresStorageError.self) { try await store.migrate() }
        let description = error?.description ?? ""
        #expect(description.hasPrefix("could not migrate the PostgreSQL database at "), "\(description)")
        #expect(description.hasSuffix(": SQLSTATE 42501: permission denied for schema public"), "\(description)")
    }

    @Test("a server error is summed up by its SQLSTATE and message, never a value it quotes")
    func failureSummaryQuotesNoValue() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let refused = await #expect(throws: PSQLError.self) { try await PostgresTestServer.execute(url, "SELECT 'hunter2'::boolean") }
        #expect(refused?.storeFailureSummary == "SQLSTATE 22P02: a data exception (its message, which can quote a value, is not shown)")
        let missing = await #expect(throws: PSQLError.self) { try await PostgresTestServer.execute(url, "SELECT * FROM no_such_table") }
        #expect(missing?.storeFailureSummary == #"SQLSTATE 42P01: relation "no_such_table" does not exist"#)
    }

    @Test("a database that is not UTF8 is refused at migration with a clear error; nothing is created")
    func nonUTF8DatabaseIsRefused() async throws {
        // Folding normalizes to NFC, which PostgreSQL does only in a UTF8 database.
        let url = try await PostgresTestServer.freshDatabase(options: "ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
        let store = try PostgresTestServer.store(url)
        defer { store.shutdown() }
        let error = await #expect(throws: PostgresStorageError.self) { try await store.migrate() }
        #expect(
            error?.description
                == "the PostgreSQL database's encoding is LATIN1: Gatehouse needs a UTF8 database (CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0, with a UTF-8 or C locale)"
        )
        #expect(try await PostgresTestServer.count(url, table: "pg_tables", where: "tablename = 'accounts'") == 0)
    }

    @Test(
        "a database whose transactions default to another isolation than READ COMMITTED is refused at migration with a clear error; nothing is created"
    )
    func otherDefaultIsolationIsRefused() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let name = try #require(URLComponents(string: url)?.path.dropFirst())
        try await PostgresTestServer.execute(url, "ALTER DATABASE \(name) SET default_transaction_isolation = 'repeatable read'")
        let store = try PostgresTestServer.store(url)
        defer { store.shutdown() }
        let error = await #expect(throws: PostgresStorageError.self) { try await store.migrate() }
        #expect(
            error?.description.hasPrefix("the PostgreSQL connections' default_transaction_isolation is 'repeatable read'") == true,
            "\(String(describing: error))")
        #expect(try await PostgresTestServer.count(url, table: "pg_tables", where: "tablename = 'accounts'") == 0)
    }

    @Test(
        "a database that turned read-only (a connection left on a demoted primary after a failover) refuses writes as a store out of a resource, the API's 503, as SQLite's read-only file does: never a 500"
    )
    func readOnlyDatabaseIsUnavailable() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let name = try #require(URLComponents(string: url)?.path.dropFirst())
        let migrating = try PostgresTestServer.store(url)
        try await migrating.migrate()
        migrating.shutdown()
        try await PostgresTestServer.execute(url, "ALTER DATABASE \(name) SET default_transaction_read_only = on")
        let store = try PostgresTestServer.store(url)
        defer { store.shutdown() }
        let error = await #expect(throws: StorageError.self) {
            try await store.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        }
        #expect(error == .exhausted(condition: "the database is read-only (SQLSTATE 25006)"), "\(String(describing: error))")
        #expect(try await store.account(uid: "u1") == nil)
    }

    @Test("a server without ICU's root collation is refused at migration with a clear error; nothing is created")
    func serverWithoutICUIsRefused() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        // What a PostgreSQL built without ICU lacks: email lookup and account search fold
        // text with it, and would otherwise fail at the first sign-in that looks one up.
        try await PostgresTestServer.execute(url, #"DROP COLLATION pg_catalog."und-x-icu""#)
        let store = try PostgresTestServer.store(url)
        defer { store.shutdown() }
        let error = await #expect(throws: PostgresStorageError.self) { try await store.migrate() }
        #expect(
            error?.description
                == #"the PostgreSQL server has no ICU collation "und-x-icu" in this database: Gatehouse folds email addresses and account searches with it; use a PostgreSQL server built with ICU, as the distributions' packages and the official images are"#
        )
        #expect(try await PostgresTestServer.count(url, table: "pg_tables", where: "tablename = 'accounts'") == 0)
    }

    @Test("the server stops and starts again: requests fail meanwhile, then the same store recovers without a restart; data intact")
    func recoversAfterServerRestart() async throws {
        let cluster = try await PostgresCluster()
        defer { cluster.destroy() }
        try await cluster.start()
        // One connection: a request that left its lease behind would starve every later one.
        let store = try PostgresStorage(
            url: cluster.url, maximumConnections: 1, operationTimeout: .seconds(4), logger: PostgresTestServer.quietLogger)
        try await store.migrate()
        let key = ServiceKeyRecord(
            id: "sk_restart", name: "n", secretHash: "hash", scopes: ["admin"], createdAt: Date(timeIntervalSince1970: 1_800_000_000))
        try await store.insertServiceKey(key)

        try await cluster.stop()
        // While the server is down a request fails as unavailable within the store's timeout
        // (it does not queue for as long as the pool keeps trying).
        let failing = ContinuousClock.now
        await #expect(throws: StorageError.unavailable) { try await store.ping() }
        #expect(ContinuousClock.now - failing < .seconds(10))
        // A request cancelled by its caller fails at once, not when the 4 s timeout ends it:
        // the store passes cancellation on to the pool.
        let cancelled = Task { try await store.ping() }
        await Task.yield()
        let cancelledAt = ContinuousClock.now
        cancelled.cancel()
        let outcome = await cancelled.result
        #expect(ContinuousClock.now - cancelledAt < .seconds(2))
        #expect(throws: (any Error).self) { try outcome.get() }
        try await cluster.start()
        let fresh = try PostgresStorage(url: cluster.url, maximumConnections: 1, logger: PostgresTestServer.quietLogger)
        try await fresh.ping()
        fresh.shutdown()
        let restarted = ContinuousClock.now
        var recovered = false
        for _ in 0..<300 where !recovered {
            recovered = (try? await store.ping()) != nil
            if !recovered { try await Task.sleep(for: .milliseconds(100)) }
        }
        print("postgres restart: the pool served again \(ContinuousClock.now - restarted) after the server came back")
        // Neither the failed nor the cancelled request kept the only connection slot.
        #expect(recovered)
        #expect(try await store.serviceKey(secretHash: "hash") == key)
        store.shutdown()
    }

    @Test(
        "a server that asks for a password: the right one connects; a wrong one and none at all are named at once with what went wrong, never the password"
    )
    func passwordAuthentication() async throws {
        let cluster = try await PostgresCluster(password: "right-horse-battery")
        defer { cluster.destroy() }
        try await cluster.start()
        let good = try PostgresTestServer.store(cluster.url, maximumConnections: 1)
        try await good.awaitReachable()
        good.shutdown()
        let cases = [
            (
                "postgres://gatehouse:wrong-staple@127.0.0.1:\(cluster.port)/postgres?sslmode=disable",
                "SQLSTATE 28P01: password authentication failed"
            ),
            ("postgres://gatehouse@127.0.0.1:\(cluster.port)/postgres?sslmode=disable", "asks for a password, and the database URL gives none"),
        ]
        for (url, said) in cases {
            // A long timeout: the answer must come from what the server said, not from waiting.
            let store = try PostgresTestServer.store(url, maximumConnections: 1)
            let started = ContinuousClock.now
            let error = await #expect(throws: PostgresStorageError.self) { try await store.awaitReachable() }
            #expect(error?.description.contains(said) == true, "\(String(describing: error))")
            #expect(error?.description.contains("wrong-staple") == false)
            #expect(ContinuousClock.now - started < .seconds(30), "\(ContinuousClock.now - started)")
            store.shutdown()
        }
    }

    @Test(
        "a pooler that drops the statement_timeout startup parameter is named at start, with the setting the connections have and the one the role needs; a direct connection is not"
    )
    func droppedStatementTimeoutIsNamed() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        var components = try #require(URLComponents(string: url))
        let proxy = try BlackHoleProxy(targetPort: try #require(components.port), droppingStartupParameter: "statement_timeout")
        defer { proxy.close() }
        components.port = proxy.port
        for (target, throughPooler) in [(url, false), (try #require(components.string), true)] {
            // A loaded machine may take seconds to open the connection: the wait is the test
            // server's, as in the test below.
            let messages = try await Self.startupLog(target, operationTimeout: .seconds(60))
            let warnings = messages.filter { $0.contains("statement_timeout") }
            if throughPooler {
                #expect(warnings.count == 1, "\(messages)")
                #expect(warnings.first?.contains("db.statement_timeout=0 db.statement_timeout.expected=60000ms") == true, "\(warnings)")
                #expect(warnings.first?.contains("ALTER ROLE … SET statement_timeout = '60000ms'") == true, "\(warnings)")
            } else {
                #expect(warnings.isEmpty, "\(warnings)")
            }
        }
    }

    @Test("a role whose commits are acknowledged before they are on disk (synchronous_commit = off) is named at start, with what to set")
    func asynchronousCommitIsNamed() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let name = try #require(URLComponents(string: url)?.path.dropFirst())
        // The test cluster itself runs with synchronous_commit off (scripts/postgres): the
        // database's own setting decides.
        for asynchronous in [false, true] {
            try await PostgresTestServer.execute(url, "ALTER DATABASE \(name) SET synchronous_commit = \(asynchronous ? "off" : "on")")
            // A loaded machine may take seconds to open the connection: the wait is the test
            // server's, not the 5 s default.
            let messages = try await Self.startupLog(url, operationTimeout: .seconds(60))
            let warnings = messages.filter { $0.contains("acknowledges commits before they are on disk") }
            if asynchronous {
                #expect(warnings.count == 1 && warnings.first?.contains("db.setting=synchronous_commit db.setting.value=off") == true, "\(warnings)")
                #expect(warnings.first?.contains("ALTER ROLE … SET synchronous_commit = on") == true, "\(warnings)")
            } else {
                #expect(warnings.isEmpty, "\(warnings)")
            }
        }
    }

    /// What a store logs while it waits for `url` to be reachable at start (one connection).
    static func startupLog(_ url: String, operationTimeout: Duration) async throws -> [String] {
        let records = LogRecords()
        let store = try PostgresStorage(
            url: url, maximumConnections: 1, operationTimeout: operationTimeout, logger: Logger(label: "probe") { _ in records.handler })
        try await store.awaitReachable()
        store.shutdown()
        return records.messages
    }

    @Test("time settings as SHOW gives them, in milliseconds; other forms are not read")
    func shownTimeSettings() {
        let cases: [(String, Int?)] = [
            ("0", 0), ("250ms", 250), ("5s", 5000), ("1min", 60_000), ("2h", 7_200_000), ("1d", 86_400_000), ("5 s", nil), ("s", nil),
            ("5x", nil), ("", nil), ("٥s", nil),
        ]
        for (shown, milliseconds) in cases {
            #expect(PostgresStorage.settingMilliseconds(shown) == milliseconds, "\(shown)")
        }
    }

    @Test("TLS: verify-full with the server's CA connects over TLS; another CA, or a host name the certificate does not name, is refused")
    func tlsConnections() async throws {
        let cluster = try await PostgresCluster(tls: true)
        defer { cluster.destroy() }
        try await cluster.start()
        let ca = try #require(cluster.certificates?.caPath)
        let verified = try PostgresStorage(
            url: "postgres://gatehouse@localhost:\(cluster.port)/postgres?sslmode=verify-full&sslrootcert=\(ca)", maximumConnections: 1,
            logger: PostgresTestServer.quietLogger)
        try await verified.migrate()
        try await verified.ping()
        // The session really is encrypted: pg_stat_ssl says so for this very connection.
        try await PostgresTestServer.execute(
            "postgres://gatehouse@localhost:\(cluster.port)/postgres?sslmode=require&sslrootcert=\(ca)",
            "DO $$ BEGIN IF NOT (SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()) THEN RAISE 'not TLS'; END IF; END $$")
        verified.shutdown()

        let otherFolder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-other-ca-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: otherFolder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: otherFolder) }
        let otherCA = try await TestCertificates.make(in: otherFolder)
        for url in [
            "postgres://gatehouse@localhost:\(cluster.port)/postgres?sslmode=verify-full&sslrootcert=\(otherCA.caPath)",
            // The certificate names only `localhost`: the same server reached by address is a mismatch.
            "postgres://gatehouse@127.0.0.1:\(cluster.port)/postgres?sslmode=verify-full&sslrootcert=\(ca)",
        ] {
            let refused = try PostgresStorage(url: url, maximumConnections: 1, operationTimeout: .seconds(3), logger: PostgresTestServer.quietLogger)
            await #expect(throws: (any Error).self) { try await refused.ping() }
            refused.shutdown()
            // Asked why, the store names the TLS failure instead of waiting out its (long) timeout.
            let asked = try PostgresTestServer.store(url, maximumConnections: 1)
            let started = ContinuousClock.now
            let error = await #expect(throws: PostgresStorageError.self) { try await asked.awaitReachable() }
            #expect(error?.description.hasPrefix("TLS with the PostgreSQL server at ") == true, "\(String(describing: error))")
            #expect(ContinuousClock.now - started < .seconds(30), "\(ContinuousClock.now - started)")
            asked.shutdown()
        }
        let missingCA = try PostgresTestServer.store(
            "postgres://gatehouse@localhost:\(cluster.port)/postgres?sslmode=verify-full&sslrootcert=\(otherFolder)/missing.pem",
            maximumConnections: 1)
        let error = await #expect(throws: PostgresStorageError.self) { try await missingCA.awaitReachable() }
        #expect(error?.description.hasPrefix("cannot use the TLS settings of the PostgreSQL database URL") == true, "\(String(describing: error))")
        missingCA.shutdown()
        // Control: the address itself is reachable, so the refusal above was the certificate check.
        let plain = try PostgresStorage(
            url: "postgres://gatehouse@127.0.0.1:\(cluster.port)/postgres?sslmode=disable", maximumConnections: 1,
            logger: PostgresTestServer.quietLogger)
        try await plain.ping()
        plain.shutdown()
    }

    @Test("database URLs: TLS modes, defaults, percent-encoded credentials; errors never repeat the password")
    func databaseURLs() throws {
        let plain = try DatabaseURL.configuration("postgres://app:p%40ss@db.internal:6543/gatehouse?sslmode=disable")
        #expect(plain.host == "db.internal" && plain.port == 6543 && plain.username == "app" && plain.password == "p@ss")
        #expect(plain.database == "gatehouse")
        #expect(try DatabaseURL.configuration("postgresql://app@db/gatehouse").port == 5432)
        for bad in ["mysql://app@db/x", "postgres://db/x", "postgres://app:sekret@db/x?sslmode=allow", "not a url"] {
            let error = #expect(throws: PostgresStorageError.self) { try DatabaseURL.configuration(bad) }
            #expect(error?.description.contains("sekret") == false)
        }
    }
}
