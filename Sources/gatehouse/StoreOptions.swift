import ArgumentParser
import CoreMetrics
import Foundation
import GatehouseCore
import GatehousePostgres
import GatehouseSQLite
import Logging
import ServiceLifecycle

/// Where the settings and the store are, shared by every command: the configuration file
/// (`--config` or `GATEHOUSE_CONFIG`), and PostgreSQL when a database URL is given
/// (`--database-url` or `GATEHOUSE_DATABASE_URL`), otherwise SQLite in the data folder.
struct StoreOptions: ParsableArguments {
    /// `--config`: a YAML or JSON configuration file.
    @Option(help: "A YAML or JSON configuration file (GATEHOUSE_CONFIG); see `gatehouse config reference`.")
    var config: String?

    /// `--data-dir`: the SQLite folder.
    @Option(help: "The folder holding the SQLite database (GATEHOUSE_DATA_DIR; default gatehouse-data).")
    var dataDir: String?

    /// `--database-url`: PostgreSQL instead.
    @Option(help: "A postgres:// URL without a password; PostgreSQL instead of SQLite (GATEHOUSE_DATABASE_URL, which may carry one).")
    var databaseURL: String?

    /// Refuses a password in `--database-url`: a process's arguments are readable by every
    /// local user (`/proc/PID/cmdline`) and stay in shell histories.
    func validate() throws {
        guard let databaseURL, let password = URLComponents(string: databaseURL)?.password, !password.isEmpty else { return }
        throw ValidationError(
            "--database-url must not carry a password: every local user can read a command's arguments. Set GATEHOUSE_DATABASE_URL in the environment or in the secrets folder (GATEHOUSE_SECRETS_DIR) instead"
        )
    }

    /// The data folder (SQLite file, the demo's key), created when missing; private to the
    /// user running Gatehouse (0700), an existing one included: it holds emails, profiles,
    /// in-flight PKCE verifiers and hashes of tokens and keys.
    func folder(environment: [String: String]) throws -> String {
        let folder = dataDir ?? environment["GATEHOUSE_DATA_DIR"] ?? "gatehouse-data"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: folder)
        return folder
    }

    /// The settings: the environment, the secrets folder and the configuration file.
    func settings() async throws -> [String: String] {
        try await SettingsEnvironment.current(configFile: config)
    }

    /// Opens and migrates the store for `body` (one-shot commands): a PostgreSQL pool runs in
    /// a child task for exactly that long, and is stopped when `body` returns or throws.
    func withStore<T: Sendable>(environment: [String: String], logger: Logger, _ body: (any GatehouseStorage) async throws -> T) async throws
        -> T
    {
        let (storage, pool) = try make(environment: environment, logger: logger, runsPool: false, metricsFactory: NOOPMetricsHandler.instance)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            if let pool { group.addTask { try await pool.run() } }
            // Cancelling ends the pool's run; the group then waits for it.
            defer { group.cancelAll() }
            // A one-shot command says at once that the database cannot be reached.
            if let postgres = storage as? PostgresStorage { try await postgres.awaitReachable() }
            try await storage.migrate()
            return try await body(storage)
        }
    }

    /// The store, not migrated yet, and — for PostgreSQL — the service that runs its
    /// connection pool: `serve` and `demo` run it in their service group and migrate there.
    /// On SQLite, the data folder is locked for this process first (`DataFolderLock`): a second
    /// server on the same folder stops here.
    func openForServices(environment: [String: String], metricsFactory: any MetricsFactory, logger: Logger) throws -> (
        storage: any GatehouseStorage, pool: (any Service)?
    ) {
        if !usesPostgres(environment) { try DataFolderLock.acquire(folder: try folder(environment: environment)) }
        return try make(environment: environment, logger: logger, runsPool: false, metricsFactory: metricsFactory)
    }

    /// The most connections the store opens to a database server: PostgreSQL's pool size, none
    /// for SQLite (its files are among the process's own descriptors).
    func databaseConnections(environment: [String: String]) throws -> Int {
        usesPostgres(environment) ? try TypedSettings(environment: environment).numberOrDefault("GATEHOUSE_DATABASE_POOL_SIZE") : 0
    }

    /// Whether a database URL is given (PostgreSQL), else the store is SQLite in the data folder.
    private func usesPostgres(_ environment: [String: String]) -> Bool {
        !(databaseURL ?? environment["GATEHOUSE_DATABASE_URL"] ?? "").isEmpty
    }

    private func make(environment: [String: String], logger: Logger, runsPool: Bool, metricsFactory: any MetricsFactory) throws -> (
        storage: any GatehouseStorage, pool: (any Service)?
    ) {
        if usesPostgres(environment), let url = databaseURL ?? environment["GATEHOUSE_DATABASE_URL"] {
            // Kinds, ranges and defaults are the settings catalog's (TypedSettings).
            let settings = TypedSettings(environment: environment)
            let storage = try PostgresStorage(
                url: url, maximumConnections: try settings.numberOrDefault("GATEHOUSE_DATABASE_POOL_SIZE"),
                operationTimeout: try settings.durationOrDefault("GATEHOUSE_DATABASE_TIMEOUT"), runsPool: runsPool,
                metricsFactory: metricsFactory, logger: logger)
            return (storage, runsPool ? nil : ConnectionPoolService(storage: storage))
        }
        let storage = try SQLiteStorage(path: (try folder(environment: environment) as NSString).appendingPathComponent("gatehouse.sqlite"))
        return (storage, nil)
    }
}

/// `gatehouse migrate`: applies the schema migrations and exits (they also run at start).
struct MigrateCommand: AsyncParsableCommand {
    /// The command's name and help.
    static let configuration = CommandConfiguration(commandName: "migrate", abstract: "Create or upgrade the store's schema, then exit.")

    /// Which store.
    @OptionGroup var store: StoreOptions

    /// Opens the store, which migrates it.
    func run() async throws {
        let logger = Logger(label: "gatehouse") { _ in SwiftLogNoOpLogHandler() }
        try await store.withStore(environment: try await store.settings(), logger: logger) { _ in }
        print("The store is migrated.")
    }
}
