import Foundation
import GRDB
import GatehouseCore
import GatehousePostgres
import GatehouseSQLite
import GatehouseTestSupport
import Logging
import Testing

/// A store under test: a name for the test report and a factory that gives a fresh, migrated,
/// empty store each time. Every implementation of `GatehouseStorage` is listed here, so one
/// conformance suite holds all of them to the same contract.
struct StorageBackend: CustomTestStringConvertible, Sendable {
    /// Shown in the test report.
    let name: String
    /// A fresh, migrated store.
    let make: @Sendable () async throws -> any GatehouseStorage
    /// A fresh, migrated store whose named locks' waiters give up after `lockWait`.
    let makeWaiting: @Sendable (_ lockWait: Duration) async throws -> any GatehouseStorage

    var testDescription: String { name }

    /// Every backend available in this run: PostgreSQL whenever `scripts/postgres` (which
    /// `scripts/test` uses) provides a server; `PostgresAvailabilityTests` fails otherwise,
    /// so it is never skipped silently.
    static let all: [StorageBackend] = [sqlite] + (PostgresTestServer.baseURL == nil ? [] : [postgres])

    /// SQLite in a new temporary file per store.
    static let sqlite = StorageBackend(name: "SQLite") {
        try await sqliteStore(lockWait: .seconds(60))
    } makeWaiting: { lockWait in
        try await sqliteStore(lockWait: lockWait)
    }

    /// A fresh, migrated SQLite store.
    private static func sqliteStore(lockWait: Duration) async throws -> SQLiteStorage {
        let storage = try SQLiteStorage(path: temporaryDatabasePath(), lockWait: lockWait)
        try await storage.migrate()
        return storage
    }

    /// PostgreSQL: a new database on the test server per store. The conformance suite checks
    /// what the store answers, not how fast (`PostgresTestServer.store`): ten transactions
    /// queued on one row lock exceeded the production 5 s on a loaded 2-core machine.
    static let postgres = StorageBackend(name: "PostgreSQL") {
        try await postgresStore(lockWait: .seconds(60))
    } makeWaiting: { lockWait in
        try await postgresStore(lockWait: lockWait)
    }

    /// A fresh, migrated PostgreSQL store.
    private static func postgresStore(lockWait: Duration) async throws -> PostgresStorage {
        let storage = try PostgresTestServer.store(try await PostgresTestServer.freshDatabase(), maximumConnections: 6, lockWait: lockWait)
        try await storage.migrate()
        return storage
    }

    /// A new path under a fresh temporary folder (removed when the test process exits).
    static func temporaryDatabasePath() throws -> String {
        try TestScratch.folder("storage") + "/gatehouse.sqlite"
    }

    /// A connection of its own to the SQLite file at `path`, as another process would open it:
    /// it waits for the store's writes (a busy timeout) rather than failing at once.
    static func otherConnection(_ path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        return try DatabaseQueue(path: path, configuration: configuration)
    }
}

/// The PostgreSQL conformance run must not vanish quietly when no server was provided.
@Suite struct PostgresAvailabilityTests {
    @Test("a PostgreSQL server is provided (scripts/test runs the suite under scripts/postgres)")
    func serverIsProvided() async throws {
        let url = try #require(
            PostgresTestServer.baseURL, "GATEHOUSE_TEST_DATABASE_URL is not set: run the suite with scripts/test or scripts/postgres swift test")
        #expect(url.hasPrefix("postgres://"))
        #expect(StorageBackend.all.map(\.name) == ["SQLite", "PostgreSQL"])
    }
}
