import Foundation
import GRDB
@_spi(Testing) import GatehouseCore
@_spi(Testing) import GatehouseSQLite
import Testing

/// What only the SQLite file store promises: its data survives closing and reopening the file.
@Suite struct SQLiteStorageTests {
    @Test func dataSurvivesReopeningTheFile() async throws {
        let path = try StorageBackend.temporaryDatabasePath()
        do {
            let storage = try SQLiteStorage(path: path)
            try await storage.migrate()
            try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
            try await storage.insertSession(Fixtures.session("s", uid: "u1"))
        }
        let reopened = try SQLiteStorage(path: path)
        try await reopened.migrate()
        #expect(try await reopened.account(uid: "u1") == Fixtures.account("u1"))
        #expect(try await reopened.session(idHash: SecureRandom.digest("s"), now: Fixtures.now)?.uid == "u1")
    }

    @Test("an endpoint's claim of due webhook entries is served by an index on its endpoint, not a read past other endpoints' entries")
    func outboxClaimUsesTheEndpointIndex() async throws {
        let path = try StorageBackend.temporaryDatabasePath()
        try await SQLiteStorage(path: path).migrate()
        // The condition and order of `claimOutbox`.
        let plan = try await DatabaseQueue(path: path).read { db in
            try Row.fetchAll(
                db,
                sql: """
                    EXPLAIN QUERY PLAN SELECT * FROM webhook_outbox
                    WHERE endpoint = 'app' AND status = 'pending' AND next_attempt_at <= '2030-01-01' AND (lease_until IS NULL OR lease_until <= '2030-01-01')
                    ORDER BY next_attempt_at LIMIT 8
                    """
            ).map { $0["detail"] as String }.joined(separator: "\n")
        }
        #expect(plan.contains("webhook_outbox_endpoint_due (endpoint=? AND status=? AND next_attempt_at<?)"), "\(plan)")
        #expect(!plan.contains("TEMP B-TREE"), "\(plan)")
    }

    @Test("the purge finds expired rows through an index on their time, never by reading a whole table, but for the uses of the live sessions")
    func purgeUsesIndexes() async throws {
        let path = try StorageBackend.temporaryDatabasePath()
        try await SQLiteStorage(path: path).migrate()
        #expect(SQLiteStorage.purgeStatements.count == 7)
        for statement in SQLiteStorage.purgeStatements {
            let plan = try await DatabaseQueue(path: path).read { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + statement, arguments: [Fixtures.now]).map { $0["detail"] as String }
            }
            let scans = plan.filter { $0.hasPrefix("SCAN ") && !$0.hasPrefix("SCAN session_uses") }
            #expect(scans.isEmpty, "\(statement): \(plan)")
        }
    }

    @Test("a session an older version wrote, without the time its user authenticated, counts from its sign-in")
    func aSessionWithoutItsAuthenticationTime() async throws {
        let path = try StorageBackend.temporaryDatabasePath()
        let storage = try SQLiteStorage(path: path)
        try await storage.migrate()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        var session = Fixtures.session("s", uid: "u1")
        session.authenticatedAt = session.createdAt.addingTimeInterval(-600)
        try await storage.insertSession(session)
        try await StorageBackend.otherConnection(path).write { db in try db.execute(sql: "UPDATE sessions SET authenticated_at = NULL") }
        let read = try #require(try await storage.session(idHash: session.idHash, now: Fixtures.now))
        #expect(read.authenticatedAt == session.createdAt)
    }

    @Test func aFileThatIsNotADatabaseIsRefused() async throws {
        let path = try StorageBackend.temporaryDatabasePath()
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: path))
        await #expect(throws: (any Error).self) {
            let storage = try SQLiteStorage(path: path)
            try await storage.migrate()
        }
    }
}
