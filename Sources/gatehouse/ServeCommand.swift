import ArgumentParser
import CurlClient
import Foundation
import GatehouseCore
import GatehouseServer
import Logging
import ServiceLifecycle

/// `gatehouse serve`: the gateway, configured by its settings (see the Configuration article in Docs/Gatehouse.docc).
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve", abstract: "Run the gateway.",
        discussion: """
            Configured by GATEHOUSE_* environment variables, files in GATEHOUSE_SECRETS_DIR and a \
            YAML or JSON file (--config / GATEHOUSE_CONFIG), in that order of precedence. \
            `gatehouse config reference` lists every setting; `gatehouse config show` prints the \
            effective configuration with the source of each value.
            """)

    @Option(help: "The address to listen on (GATEHOUSE_HOST).")
    var host: String?

    @Option(help: "The port to listen on (GATEHOUSE_PORT).")
    var port: Int?

    @OptionGroup var store: StoreOptions

    /// Refuses a port out of range (the listener would take it modulo 65,536).
    func validate() throws {
        try ListenPort.check(port, option: "--port")
    }

    func run() async throws {
        let loaded = try await SettingsEnvironment.load(ProcessInfo.processInfo.environment, configFile: store.config)
        let environment = loaded.values
        let logger = Logging.bootstrapJSON(level: try Logging.level(environment))
        for name in loaded.unknown {
            // A misspelt variable is silently unused otherwise; the file's keys are checked strictly.
            logger.warning(
                "\(name) is not a setting and is ignored",
                metadata: SettingsCatalog.suggestion(for: name).map { ["suggestion": "\($0)"] } ?? [:])
        }
        let settings = try ServeSettings(environment: environment, host: host, port: port)
        StartupChecks.announce(
            store: StartupChecks.storeKind(environment, databaseURL: store.databaseURL), providers: settings.gateway.providerIds, logger: logger)
        let descriptors = StartupChecks.raiseDescriptorLimit(logger: logger)
        let maxConnections = StartupChecks.connectionLimit(
            configured: settings.maxConnections, descriptorLimit: descriptors.map { Int(clamping: $0.soft) } ?? ConnectionLimit.descriptorLimit,
            upstreamConnections: settings.upstreamConnections, databaseConnections: try store.databaseConnections(environment: environment),
            operationsListener: settings.operations != nil, memoryKept: settings.gateway.memoryKept, logger: logger)
        let upstreamCalls = StartupChecks.upstreamCalls(
            configured: settings.upstreamCalls, configuredPerUser: settings.upstreamCallsPerUser,
            configuredReserved: settings.upstreamCallsReserved,
            descriptorLimit: descriptors.map { Int(clamping: $0.soft) } ?? ConnectionLimit.descriptorLimit,
            upstreamConnections: settings.upstreamConnections, databaseConnections: try store.databaseConnections(environment: environment),
            operationsListener: settings.operations != nil, memoryKept: settings.gateway.memoryKept, logger: logger)
        StartupChecks.warnAboutUploadTimeouts(settings.gateway, idleTimeout: settings.idleTimeout, logger: logger)
        StartupChecks.warnAboutPagingGaps(settings.gateway.api, logger: logger)
        StartupChecks.warnAboutDispatchers(settings.gateway.api, logger: logger)
        let metrics = ServerMetrics()
        let (storage, pool) = try store.openForServices(environment: environment, metricsFactory: metrics.metricsFactory, logger: logger)
        let http = CurlHTTPClient(
            configuration: .init(
                upstreamCalls: upstreamCalls, caBundlePath: settings.caBundlePath, maxCachedConnections: settings.upstreamConnections))
        metrics.observeOutbound(calls: upstreamCalls.calls) { http.load }
        if !settings.gateway.requireResultBinding {
            logger.warning(
                "GATEHOUSE_REQUIRE_RESULT_BINDING=false: sign-in results are redeemable by anyone holding their id for 60 s; bind them with result_challenge"
            )
        }
        let vault = try TokenVault(keys: settings.vaultKeys, store: storage)
        let gatehouse = try Gatehouse(
            configuration: settings.gateway, storage: storage, vault: vault, http: http,
            metrics: metrics.core, logger: logger)
        let drain = DrainSignal()
        // The operations listener opens at once; the public one once the store is migrated and
        // the encryption key opens it. Meanwhile /readyz says 503 and why (a database that is
        // not there yet, named).
        let migrated = Eventual<Void>()
        let state = StartupState()
        let startup = StartupGate(
            prepare: {
                try await AfterStoreReady.prepareStore(
                    storage, ready: migrated, logger: logger,
                    verify: {
                        do {
                            try await StartupChecks.requireOpeningKeys(vault)
                        } catch {
                            logger.error("Gatehouse cannot start", metadata: ["reason": "\(error)"])
                            throw error
                        }
                    }, state: state)
            }, state: { state.value }, metrics: metrics)
        let app = GatehouseServer.service(
            GatewayAssembly(gatehouse: gatehouse, metrics: metrics, demoPage: false, drain: drain), host: settings.host, port: settings.port,
            operations: settings.operations, idleTimeout: settings.idleTimeout, maxConnections: maxConnections, logger: logger,
            startup: startup
        ) { port in
            drain.markServing()
            logger.info("Gatehouse listening", metadata: ["listener.role": "public", "http.port": .stringConvertible(port)])
        } onOperationsRunning: { port in
            logger.info("Gatehouse operations listening", metadata: ["listener.role": "operations", "ops.port": .stringConvertible(port)])
        }
        let purger = ExpiredRecordsPurger(
            storage: storage, interval: settings.purgeInterval, outboxRetention: gatehouse.outboxRetentionWithoutDispatcher, logger: logger)
        let delay = try ShutdownDeadline.delay(environment, default: 5)
        // Started in this order, stopped in reverse: the drain first, then the listener (its
        // requests in flight finish), then the libcurl client, the heap trimming, then the
        // database pool.
        let trimming: [any Service] = settings.heapTrimInterval > .zero ? [HeapTrimService(interval: settings.heapTrimInterval, logger: logger)] : []
        let services: [any Service] =
            trimming + [
                HTTPClientService(client: http), app,
                AfterStoreReady.waiting(for: migrated, then: PurgeService(purger: purger)),
                DrainingService(signal: drain, delay: delay, logger: logger),
            ]
        let group = ShutdownDeadline.group(
            services: (pool.map { [$0] } ?? []) + services,
            timeout: delay + (try ShutdownDeadline.timeout(environment)), logger: logger)
        try await group.run()
    }
}

/// The settings of `serve`, read from `GATEHOUSE_*` environment variables.
struct ServeSettings {
    /// `path`, once it is found to be a readable file holding a PEM certificate: libcurl
    /// would otherwise fail every https call, while the gateway reported itself ready.
    static func caBundle(_ path: String) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ValidationError("GATEHOUSE_CA_BUNDLE (\(path)) cannot be read")
        }
        defer { try? handle.close() }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue,
            let head = try? handle.read(upToCount: SettingsEnvironment.maximumFileBytes * 16),
            String(decoding: head, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----")
        else {
            throw ValidationError("GATEHOUSE_CA_BUNDLE (\(path)) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        return path
    }

    var host: String
    var port: Int
    var caBundlePath: String?
    /// Provider connections libcurl keeps for reuse (`GATEHOUSE_UPSTREAM_CONNECTIONS`).
    var upstreamConnections: Int
    /// Calls in flight at once (`GATEHOUSE_UPSTREAM_CALLS`); `nil`: what fits.
    var upstreamCalls: Int?
    /// One user's calls in flight and waiting (`GATEHOUSE_UPSTREAM_CALLS_PER_USER`); `nil`: a sixteenth.
    var upstreamCallsPerUser: Int?
    /// Slots kept for the gateway's own flows (`GATEHOUSE_UPSTREAM_CALLS_RESERVED`); `nil`: an eighth.
    var upstreamCallsReserved: Int?
    /// The public listener's connection limit (`GATEHOUSE_MAX_CONNECTIONS`); `nil`: what the descriptor limit leaves.
    var maxConnections: Int?
    /// How long a connection to either listener may stay silent before it is closed (`GATEHOUSE_IDLE_TIMEOUT`).
    var idleTimeout: Duration
    /// Seconds between two purges of expired flows, results and sessions (`GATEHOUSE_PURGE_INTERVAL`).
    var purgeInterval: Duration
    /// Time between two returns of freed heap memory to the system (`GATEHOUSE_HEAP_TRIM_INTERVAL`; zero: never).
    var heapTrimInterval: Duration
    var gateway: GatewayConfiguration
    /// The configured encryption keys, current first.
    var vaultKeys: [Data]
    /// Where the operations listener binds (`GATEHOUSE_OPS_ADDRESS`); `nil` when `off`.
    var operations: OperationsAddress?

    /// `GATEHOUSE_OPS_ADDRESS`: `host:port` (`[::1]:9090`), or `off`.
    static func operationsAddress(_ environment: [String: String], default fallback: String) throws -> OperationsAddress? {
        let text = environment["GATEHOUSE_OPS_ADDRESS"] ?? fallback
        if text == "off" { return nil }
        guard let address = OperationsAddress(parsing: text) else {
            throw ValidationError("GATEHOUSE_OPS_ADDRESS must be host:port (127.0.0.1:9090, [::1]:9090) or off, not \(text.debugDescription)")
        }
        return address
    }

    init(environment: [String: String], host: String?, port: Int?) throws {
        func required(_ name: String) throws -> String {
            guard let value = environment[name], !value.isEmpty else { throw ValidationError("\(name) must be set") }
            return value
        }
        // Kinds and ranges are the settings catalog's (TypedSettings checks each value against it).
        let settings = TypedSettings(environment: environment)
        self.host = host ?? environment["GATEHOUSE_HOST"] ?? "127.0.0.1"
        self.port = try port ?? settings.numberOrDefault("GATEHOUSE_PORT")
        self.operations = try Self.operationsAddress(environment, default: "127.0.0.1:9090")
        self.caBundlePath = try environment["GATEHOUSE_CA_BUNDLE"].map(Self.caBundle)
        self.upstreamConnections = try settings.numberOrDefault("GATEHOUSE_UPSTREAM_CONNECTIONS")
        self.upstreamCalls = try settings.number("GATEHOUSE_UPSTREAM_CALLS")
        self.upstreamCallsPerUser = try settings.number("GATEHOUSE_UPSTREAM_CALLS_PER_USER")
        self.upstreamCallsReserved = try settings.number("GATEHOUSE_UPSTREAM_CALLS_RESERVED")
        self.maxConnections = try settings.number("GATEHOUSE_MAX_CONNECTIONS")
        self.idleTimeout = try settings.durationOrDefault("GATEHOUSE_IDLE_TIMEOUT")
        self.purgeInterval = .seconds(try settings.numberOrDefault("GATEHOUSE_PURGE_INTERVAL"))
        // Whole seconds: each trim locks the allocator's arenas in turn, not something to do
        // many times a second.
        self.heapTrimInterval = .seconds(try settings.numberOrDefault("GATEHOUSE_HEAP_TRIM_INTERVAL"))
        self.vaultKeys = try VaultSettings.keys(environment: environment)
        var github: GitHubConfiguration?
        if let clientID = environment["GATEHOUSE_GITHUB_CLIENT_ID"] {
            var config = GitHubConfiguration(clientID: clientID, clientSecret: try required("GATEHOUSE_GITHUB_CLIENT_SECRET"))
            if let value = environment["GATEHOUSE_GITHUB_AUTHORIZE_URL"] { config.authorizeURL = value }
            if let value = environment["GATEHOUSE_GITHUB_TOKEN_URL"] { config.tokenURL = value }
            if let value = environment["GATEHOUSE_GITHUB_API_URL"] { config.apiBaseURL = value }
            if let value = environment["GATEHOUSE_GITHUB_AVATAR_URL_PREFIXES"] {
                config.avatarURLPrefixes = value.split(separator: ",").map(String.init)
            }
            github = config
        }
        var microsoft: MicrosoftConfiguration?
        if let clientID = environment["GATEHOUSE_MICROSOFT_CLIENT_ID"] {
            var config = MicrosoftConfiguration(clientID: clientID, clientSecret: try required("GATEHOUSE_MICROSOFT_CLIENT_SECRET"))
            if let value = environment["GATEHOUSE_MICROSOFT_TENANT"] { config.tenant = value }
            if let value = environment["GATEHOUSE_MICROSOFT_ALLOWED_TENANTS"] {
                config.allowedTenants = Set(value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
                guard config.allowedTenants.allSatisfy(MicrosoftTenants.isGUID) else {
                    throw ValidationError("GATEHOUSE_MICROSOFT_ALLOWED_TENANTS must list tenant GUIDs only (a token's tid is one)")
                }
            }
            if let value = environment["GATEHOUSE_MICROSOFT_LOGIN_URL"] { config.loginBaseURL = value }
            if let value = environment["GATEHOUSE_MICROSOFT_GRAPH_URL"] { config.graphBaseURL = value }
            microsoft = config
        }
        self.gateway = GatewayConfiguration(
            publicURL: try required("GATEHOUSE_PUBLIC_URL"),
            returnToAllowList: (environment["GATEHOUSE_RETURN_TO_ALLOWLIST"] ?? "").split(separator: ",").map(String.init),
            developmentMode: try settings.flag("GATEHOUSE_DEVELOPMENT") ?? false,
            github: github, microsoft: microsoft, oidcProviders: try OIDCSettings.providers(from: environment))
        try ProfileSettings.apply(environment, to: &self.gateway)
        // Kept photos in the form the listener sends without copying.
        self.gateway.photoBytes = PhotoBuffer.joining
    }
}

extension Logging {
    /// Routes swift-log to JSON lines on standard error and returns the gateway's logger.
    static func bootstrapJSON(level: Logger.Level) -> Logger {
        let sink = LogSink(capture: false)
        LoggingSystem.bootstrap { label in
            var handler = JSONLogHandler(label: label, sink: sink)
            handler.logLevel = level
            return handler
        }
        return Logger(label: "gatehouse")
    }

    /// `GATEHOUSE_LOG_LEVEL` (default `info`); an unknown level stops the start.
    static func level(_ environment: [String: String]) throws -> Logger.Level {
        guard let text = environment["GATEHOUSE_LOG_LEVEL"] else { return .info }
        guard let level = Logger.Level(rawValue: text) else {
            throw ValidationError(
                "GATEHOUSE_LOG_LEVEL must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), not \(text.debugDescription)")
        }
        return level
    }
}

/// Namespace for logging set-up helpers.
enum Logging {}
