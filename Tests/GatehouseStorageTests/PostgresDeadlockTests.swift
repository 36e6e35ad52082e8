import Foundation
@_spi(Testing) import GatehouseCore
import GatehousePostgres
import GatehouseTestSupport
import Logging
import PostgresNIO
import Synchronization
import Testing

/// A real deadlock between a store transaction and another session: PostgreSQL aborts the
/// store's transaction with 40P01, and the store runs it again instead of failing the request.
@Suite struct PostgresDeadlockTests {
    @Test("a deadlock (40P01) aborts the store's unlink; the store retries it and the unlink succeeds")
    func deadlockIsRetried() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        let other = PostgresClient(
            configuration: try DatabaseURL.configuration(url, maximumConnections: 2), backgroundLogger: PostgresTestServer.quietLogger)
        let runner = Task { await other.run() }
        defer { runner.cancel() }
        // A waiting session looks for a deadlock once, this long after it began to wait: the
        // store's sessions (opened after this) look after 5 s, by when this test has closed the
        // cycle however slowly it runs; this test's session after 60 s, so the store's
        // transaction is the one PostgreSQL aborts.
        try await other.query(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET deadlock_timeout = ''5s''', current_database()); END $$",
            logger: PostgresTestServer.quietLogger)
        let records = LogRecords()
        let store = try PostgresTestServer.store(url, logger: Logger(label: "store") { _ in records.handler })
        try await store.migrate()
        try await store.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await store.addLink(Fixtures.link("u1", provider: "oidc.emulator", federatedId: "o1"))

        try await other.withConnection { connection in
            try await connection.query("SET deadlock_timeout = '60s'", logger: PostgresTestServer.quietLogger)
            try await connection.query("BEGIN", logger: PostgresTestServer.quietLogger)
            // 1. This session holds the OIDC link's row.
            try await connection.query(
                "UPDATE provider_links SET linked_at = linked_at WHERE uid = 'u1' AND provider_id = 'oidc.emulator'",
                logger: PostgresTestServer.quietLogger)
            // 2. The store's unlink locks the account row, then waits for the link's row.
            let unlink = Task { try await store.deleteLink(uid: "u1", providerId: "oidc.emulator", sparing: nil) }
            // pg_stat_activity lists the whole cluster's sessions: the other tests' too.
            var waiting = false
            let asked = ContinuousClock.now
            while !waiting, ContinuousClock.now - asked < .seconds(60) {
                try await Task.sleep(for: .milliseconds(50))
                let rows = try await other.query(
                    """
                    SELECT count(*) FROM pg_stat_activity
                    WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM provider_links%'
                    """,
                    logger: PostgresTestServer.quietLogger)
                for try await count in rows.decode(Int.self) { waiting = count == 1 }
            }
            try #require(waiting, "the store's unlink never waited for the link row")
            // 3. This session now asks for the account row: a cycle. Getting it proves that
            // PostgreSQL aborted the store's transaction.
            try await connection.query("SELECT uid FROM accounts WHERE uid = 'u1' FOR UPDATE", logger: PostgresTestServer.quietLogger)
            try await connection.query("COMMIT", logger: PostgresTestServer.quietLogger)
            // 4. The store ran the unlink again, after this session let go.
            guard case .deleted(let link) = try await unlink.value else {
                Issue.record("the retried unlink did not delete the link")
                return
            }
            #expect(link.providerId == "oidc.emulator")
        }
        #expect(try await store.links(uid: "u1").map(\.providerId) == ["github.com"])
        #expect(records.messages.contains("transaction retried attempt=1 sqlstate=40P01"), "\(records.messages)")
        store.shutdown()
    }
}

/// Log lines a store wrote, as `message key=value…` (metadata sorted by key).
final class LogRecords: Sendable {
    private let lines = Mutex<[String]>([])

    /// Everything recorded so far.
    var messages: [String] { lines.withLock { $0 } }

    /// A handler that records into this collection.
    var handler: Handler { Handler(records: self) }

    /// Records notices and above (the driver's trace chatter stays out).
    struct Handler: LogHandler {
        /// Where lines go.
        let records: LogRecords
        /// The logger's own metadata.
        var metadata: Logger.Metadata = [:]
        /// The lowest level recorded.
        var logLevel: Logger.Level = .notice

        /// One metadata value.
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        /// Records one line.
        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            let text = ([event.message.description] + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }).joined(separator: " ")
            records.lines.withLock { $0.append(text) }
        }
    }
}
