import Foundation
import GatehousePostgres
import Logging
import PostgresNIO

/// The PostgreSQL server `scripts/postgres` started for this run.
public enum PostgresTestServer {
    /// `GATEHOUSE_TEST_DATABASE_URL`, a superuser connection to the server's `postgres` database.
    public static let baseURL = ProcessInfo.processInfo.environment["GATEHOUSE_TEST_DATABASE_URL"]

    /// A logger that drops everything (the pools' background chatter).
    public static let quietLogger = Logger(label: "postgres-test") { _ in SwiftLogNoOpLogHandler() }

    /// One administrative client for the whole run (it creates the per-store databases).
    private static let admin: PostgresClient? = {
        guard let baseURL, let configuration = try? DatabaseURL.configuration(baseURL, maximumConnections: 2) else { return nil }
        let client = PostgresClient(configuration: configuration, backgroundLogger: quietLogger)
        Task { await client.run() }
        return client
    }()

    /// A store on `url` for a test that is not about timeouts: its operations may wait 60 s
    /// instead of the production 5 s, because the whole suite shares two cooperative threads
    /// on a loaded 2-core machine and an operation can wait that long for its turn. The
    /// timeout itself has its own tests (`PostgresStorageTests`, `DatabaseFailoverTests`).
    public static func store(
        _ url: String, maximumConnections: Int = 2, lockWait: Duration = .seconds(60), logger: Logger = quietLogger
    ) throws -> PostgresStorage {
        try PostgresStorage(url: url, maximumConnections: maximumConnections, operationTimeout: .seconds(60), lockWait: lockWait, logger: logger)
    }

    /// Creates an empty database (with `options` after `CREATE DATABASE name`, such as an
    /// encoding) and returns its URL.
    public static func freshDatabase(options: String = "") async throws -> String {
        guard let baseURL, let admin, var components = URLComponents(string: baseURL) else {
            throw PostgresStorageTestError("GATEHOUSE_TEST_DATABASE_URL is not set; run the tests with scripts/test or scripts/postgres")
        }
        let name = "gatehouse_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await admin.query("CREATE DATABASE \(unescaped: name) \(unescaped: options)")
        components.path = "/" + name
        return components.string ?? baseURL
    }
}

/// A test set-up failure.
public struct PostgresStorageTestError: Error, CustomStringConvertible {
    /// What is missing.
    public let description: String
    /// An error saying `description`.
    init(_ description: String) { self.description = description }
}

extension PostgresTestServer {
    /// Runs one SQL statement on the database at `url` (tests that tamper with a schema).
    public static func execute(_ url: String, _ sql: String) async throws {
        try await withSession(url) { connection in _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: quietLogger) }
    }

    /// `body` with a connection of its own to the database at `url`, outside any store (a test
    /// holding rows that a store's write then waits for).
    public static func withSession<T: Sendable>(_ url: String, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        let client = PostgresClient(configuration: try DatabaseURL.configuration(url, maximumConnections: 1), backgroundLogger: quietLogger)
        let runner = Task { await client.run() }
        defer { runner.cancel() }
        return try await client.withConnection { try await body($0) }
    }

    /// The plan PostgreSQL chooses for `sql` on the database at `url` (`EXPLAIN (COSTS OFF)`),
    /// with sequential scans and sorts discouraged, so that an index that can serve the query
    /// shows in it even on a table of a few rows.
    public static func plan(_ url: String, _ sql: String) async throws -> String {
        try await plan(url, PostgresQuery(unsafeSQL: sql))
    }

    /// The plan of `query`, its bound values included, as `plan(_:_:)` reads it.
    public static func plan(_ url: String, _ query: PostgresQuery) async throws -> String {
        let client = PostgresClient(configuration: try DatabaseURL.configuration(url, maximumConnections: 1), backgroundLogger: quietLogger)
        let runner = Task { await client.run() }
        defer { runner.cancel() }
        return try await client.withConnection { connection in
            try await connection.query("SET enable_seqscan = off", logger: quietLogger)
            try await connection.query("SET enable_sort = off", logger: quietLogger)
            var lines: [String] = []
            let explained = PostgresQuery(unsafeSQL: "EXPLAIN (COSTS OFF) " + query.sql, binds: query.binds)
            for try await line in try await connection.query(explained, logger: quietLogger)
                .decode(String.self)
            {
                lines.append(line)
            }
            return lines.joined(separator: "\n")
        }
    }

    /// The rows of `table` in the database at `url` (those matching `condition`, SQL, when given).
    public static func count(_ url: String, table: String, where condition: String? = nil) async throws -> Int {
        let client = PostgresClient(configuration: try DatabaseURL.configuration(url, maximumConnections: 1), backgroundLogger: quietLogger)
        let runner = Task { await client.run() }
        defer { runner.cancel() }
        for try await count in try await client.query(
            PostgresQuery(unsafeSQL: "SELECT count(*)::int FROM \(table)\(condition.map { " WHERE \($0)" } ?? "")")
        ).decode(Int.self) {
            return count
        }
        return 0
    }

    /// Runs `body` while a transaction on the database at `url` holds `table` in ACCESS
    /// EXCLUSIVE mode (every statement touching it waits); commits afterwards, whatever `body` did.
    public static func withTableLocked<T: Sendable>(_ url: String, table: String, _ body: @Sendable () async throws -> T) async throws -> T {
        let client = PostgresClient(configuration: try DatabaseURL.configuration(url, maximumConnections: 1), backgroundLogger: quietLogger)
        let runner = Task { await client.run() }
        defer { runner.cancel() }
        return try await client.withConnection { connection in
            try await connection.query("BEGIN", logger: quietLogger)
            try await connection.query(PostgresQuery(unsafeSQL: "LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE"), logger: quietLogger)
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            try await connection.query("COMMIT", logger: quietLogger)
            return try result.get()
        }
    }
}
