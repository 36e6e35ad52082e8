import ArgumentParser
import CurlClient
import Foundation
import GatehouseCore
import GatehouseServer
import Logging
import ProviderEmulator
import ServiceLifecycle

/// `gatehouse demo`: zero configuration — SQLite in a local folder, the provider emulator
/// alongside, development mode on loopback, and the demo page at `/`.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "demo", abstract: "Run Gatehouse with the provider emulator and the demo page.")

    @Option(help: "The gateway's port (0 picks a free one; GATEHOUSE_PORT is serve's, not read here).")
    var port = 8080

    @Option(help: "The emulator's port (0 picks a free one).")
    var emulatorPort = 8081

    @Option(help: "Join an emulator that is already running at this URL instead of starting one (several demos, one deployment).")
    var emulatorURL: String?

    @OptionGroup(title: "Store (a fresh data folder is a fresh demo; it also keeps the demo's encryption key)") var store: StoreOptions

    /// Refuses ports out of range (a listener would take them modulo 65,536).
    func validate() throws {
        try ListenPort.check(port, option: "--port")
        try ListenPort.check(emulatorPort, option: "--emulator-port")
    }

    func run() async throws {
        let environment = try await store.settings()
        let logger = Logging.bootstrapJSON(level: try Logging.level(environment))
        let dataDir = try store.folder(environment: environment)
        // Before the store is opened, which creates its file: whether the folder is a demo's.
        let keys = try VaultSettings.keys(environment: environment) {
            try Self.requireDemoFolder(dataDir)
            return try Self.demoKey(dataDir: dataDir)
        }
        let descriptors = StartupChecks.raiseDescriptorLimit(logger: logger)
        let metrics = ServerMetrics()
        let (storage, pool) = try store.openForServices(environment: environment, metricsFactory: metrics.metricsFactory, logger: logger)
        let vault = try TokenVault(keys: keys, store: storage)
        // Both listeners bind first (0: the kernel picks) and report their ports; the gateway's
        // configuration, which names both URLs, is assembled from what they got.
        let emulatorBase = Eventual<String>()
        if let url = self.emulatorURL { emulatorBase.set(url.hasSuffix("/") ? String(url.dropLast()) : url) }
        let drain = DrainSignal()
        // The operations listener on a port of its own (any free one unless GATEHOUSE_OPS_ADDRESS says).
        let operations = try ServeSettings.operationsAddress(environment, default: "127.0.0.1:0")
        let idleTimeout = try TypedSettings(environment: environment).durationOrDefault("GATEHOUSE_IDLE_TIMEOUT")
        // The photo cache, the API answer budget (the demo's sample policy passes Graph's answers)
        // and the live-profile and account caches' budgets.
        let memoryKept = GatewayConfiguration.memoryKept(
            photoCacheBytes: try TypedSettings(environment: environment).numberOrDefault("GATEHOUSE_PHOTO_CACHE_BYTES"),
            apiBufferBytes: try TypedSettings(environment: environment).numberOrDefault("GATEHOUSE_API_BUFFER_BYTES"))
        let maxConnections = StartupChecks.connectionLimit(
            configured: try TypedSettings(environment: environment).number("GATEHOUSE_MAX_CONNECTIONS"),
            descriptorLimit: descriptors.map { Int(clamping: $0.soft) } ?? ConnectionLimit.descriptorLimit,
            upstreamConnections: CurlClientConfiguration().maxCachedConnections,
            databaseConnections: try store.databaseConnections(environment: environment), operationsListener: operations != nil,
            memoryKept: memoryKept, logger: logger)
        let upstreamCalls = StartupChecks.upstreamCalls(
            configured: try TypedSettings(environment: environment).number("GATEHOUSE_UPSTREAM_CALLS"),
            configuredPerUser: try TypedSettings(environment: environment).number("GATEHOUSE_UPSTREAM_CALLS_PER_USER"),
            configuredReserved: try TypedSettings(environment: environment).number("GATEHOUSE_UPSTREAM_CALLS_RESERVED"),
            descriptorLimit: descriptors.map { Int(clamping: $0.soft) } ?? ConnectionLimit.descriptorLimit,
            upstreamConnections: CurlClientConfiguration().maxCachedConnections,
            databaseConnections: try store.databaseConnections(environment: environment), operationsListener: operations != nil,
            memoryKept: memoryKept, logger: logger)
        let http = CurlHTTPClient(configuration: .init(upstreamCalls: upstreamCalls))
        metrics.observeOutbound(calls: upstreamCalls.calls) { http.load }
        let gateway = GatehouseServer.service(
            host: "127.0.0.1", port: port, operations: operations, idleTimeout: idleTimeout, maxConnections: maxConnections, logger: logger
        ) { port in
            let publicURL = "http://127.0.0.1:\(port)"
            var configuration = Self.configuration(publicURL: publicURL, emulatorURL: try await emulatorBase.value())
            try ProfileSettings.apply(environment, to: &configuration)
            StartupChecks.warnAboutUploadTimeouts(configuration, idleTimeout: idleTimeout, logger: logger)
            StartupChecks.warnAboutPagingGaps(configuration.api, logger: logger)
            StartupChecks.warnAboutDispatchers(configuration.api, logger: logger)
            let gatehouse = try Gatehouse(
                configuration: configuration, storage: storage, vault: vault, http: http, metrics: metrics.core, logger: logger)
            return GatewayAssembly(gatehouse: gatehouse, metrics: metrics, demoPage: true, drain: drain)
        } onRunning: { port in
            drain.markServing()
            // Written in one call and unbuffered, so a script reading our output sees it at once.
            FileHandle.standardOutput.write(Data("Gatehouse ready at http://127.0.0.1:\(port)\n".utf8))
        } onOperationsRunning: { port in
            FileHandle.standardOutput.write(Data("Operations (/metrics, /readyz) at http://127.0.0.1:\(port)\n".utf8))
        }
        let purger = ExpiredRecordsPurger(storage: storage, interval: .seconds(300), logger: logger)
        // The demo stops at once unless told to drain (GATEHOUSE_SHUTDOWN_DELAY).
        let delay = try ShutdownDeadline.delay(environment, default: 0)
        // Stopped in reverse order: the drain, the emulator, the purger, the gateway, the
        // libcurl client, the heap trimming, the database pool.
        let migrated = Eventual<Void>()
        var services: [any Service] = pool.map { [$0] } ?? []
        // Like serve: what a spike of connections leaves goes back to the system.
        let trimInterval = Duration.seconds(try TypedSettings(environment: environment).numberOrDefault("GATEHOUSE_HEAP_TRIM_INTERVAL"))
        if trimInterval > .zero { services.append(HeapTrimService(interval: trimInterval, logger: logger)) }
        services += [
            HTTPClientService(client: http), AfterStoreReady.migrating(storage, ready: migrated, logger: logger, then: gateway),
            AfterStoreReady.waiting(for: migrated, then: PurgeService(purger: purger)),
        ]
        if self.emulatorURL == nil {
            services.append(
                ProviderEmulator().application(port: emulatorPort, logger: logger) { port in
                    emulatorBase.set("http://127.0.0.1:\(port)")
                    // On a line of its own, like the gateway's: `--emulator-port 0` picks the port.
                    FileHandle.standardOutput.write(Data("Emulator at http://127.0.0.1:\(port)\n".utf8))
                })
        }
        // After the gateway and the emulator: told of the shutdown before them.
        services.append(DrainingService(signal: drain, delay: delay, logger: logger))
        let group = ShutdownDeadline.group(services: services, timeout: delay + (try ShutdownDeadline.timeout(environment)), logger: logger)
        try await group.run()
    }

    /// The sample native app's return address the demo allows (a private-use scheme).
    static let sampleAppScheme = "com.example.app:/oauth2redirect"
    /// The sample desktop app's return address the demo allows (any port of 127.0.0.1).
    static let sampleDesktopLoopback = "http://127.0.0.1/callback"

    /// The demo's configuration: every provider at the emulator, with the emulator's demo clients.
    static func configuration(publicURL: String, emulatorURL: String) -> GatewayConfiguration {
        let client = EmulatorConfiguration.demoGitHubClient
        let microsoftClient = EmulatorConfiguration.demoMicrosoftClient
        let oidcClient = EmulatorConfiguration.demoOIDCClient
        let yahooClient = EmulatorConfiguration.demoYahooClient
        var configuration = GatewayConfiguration(
            publicURL: publicURL,
            // The demo page, and the sample native app's scheme and desktop loopback address
            // (the NativeApps article).
            returnToAllowList: ["\(publicURL)/", Self.sampleAppScheme, Self.sampleDesktopLoopback], developmentMode: true,
            github: .emulator(baseURL: emulatorURL, clientID: client.id, clientSecret: client.secret),
            microsoft: .emulator(baseURL: emulatorURL, clientID: microsoftClient.id, clientSecret: microsoftClient.secret),
            oidcProviders: [
                .emulatorIssuer(baseURL: emulatorURL, clientID: oidcClient.id, clientSecret: oidcClient.secret),
                .emulatorYahoo(baseURL: emulatorURL, clientID: yahooClient.id, clientSecret: yahooClient.secret),
            ])
        // The emulator's provider APIs, so the ProviderAPIs article's examples work as they are.
        configuration.api = .sample(yahooBaseURL: "\(emulatorURL)/yahoo-fantasy")
        // The names the consent page shows for the sample apps.
        configuration.appNames = [Self.sampleAppScheme: "Example App", Self.sampleDesktopLoopback: "Example Desktop App"]
        // The emulator's sample app backend as both blocking hooks (the HooksAndClaims
        // article): it denies new accounts at blocked.example and makes octocat an admin.
        // GATEHOUSE_HOOK_* settings override it, setting by setting.
        configuration.hooks = HookConfiguration(
            urls: [
                .beforeCreate: "\(emulatorURL)/sample-app/hooks/before-create", .beforeSignIn: "\(emulatorURL)/sample-app/hooks/before-sign-in",
            ],
            secrets: [EmulatorConfiguration.demoHookSecret])
        // Every event to the sample app's webhook receiver, which verifies and lists them
        // (the Webhooks article); GATEHOUSE_WEBHOOK_<NAME>_* add receivers.
        configuration.webhooks = WebhookConfiguration(endpoints: [
            .init(
                name: "sample-app", url: "\(emulatorURL)/sample-app/webhooks", events: nil, secrets: [EmulatorConfiguration.demoWebhookSecret])
        ])
        // The operators' console at /admin/, with octocat (its GitHub-verified email) as the
        // operator; GATEHOUSE_ADMIN_CONSOLE=false turns it off, GATEHOUSE_ADMINS names others.
        configuration.console = ConsoleConfiguration(operators: ["octocat@github.com"])
        configuration.photoBytes = PhotoBuffer.joining
        return configuration
    }

    /// Throws unless `dataDir` may keep the demo's own key: a store without `encryption.key`
    /// beside it is a deployment's, whose key is configured elsewhere (a systemd credential, a
    /// secret), and a key made up here would seal its data under a key `serve` does not have.
    static func requireDemoFolder(_ dataDir: String) throws {
        let files = FileManager.default
        guard files.fileExists(atPath: (dataDir as NSString).appendingPathComponent("gatehouse.sqlite")),
            !files.fileExists(atPath: (dataDir as NSString).appendingPathComponent("encryption.key"))
        else { return }
        throw ValidationError(
            "GATEHOUSE_ENCRYPTION_KEY is required: the store in \(dataDir) was not made by gatehouse demo (it has no encryption.key beside it)")
    }

    /// The key generated once and kept (mode 0600) in the data folder, so that a demo's
    /// stored tokens survive restarts; used only when `GATEHOUSE_ENCRYPTION_KEY` is unset.
    static func demoKey(dataDir: String) throws -> Data {
        let path = (dataDir as NSString).appendingPathComponent("encryption.key")
        // Created only when absent (O_EXCL, 0600): an existing file is never rewritten, since
        // every token, data key and signing key in the store is sealed under it.
        let key = TokenVault.generateKey()
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            guard errno == EEXIST else { throw ValidationError("cannot create the demo's encryption key at \(path) (errno \(errno))") }
            return try existingKey(at: path)
        }
        defer { close(descriptor) }
        let text = Array((key.base64EncodedString() + "\n").utf8)
        // A key that could not be kept would seal tokens the next start cannot open.
        guard write(descriptor, text, text.count) == text.count, fsync(descriptor) == 0 else {
            unlink(path)
            throw ValidationError("cannot write the demo's encryption key to \(path)")
        }
        return key
    }

    /// The key in an existing key file; a file that cannot be read or holds anything but one
    /// base64 32-byte key stops the command (it is never replaced).
    private static func existingKey(at path: String) throws -> Data {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ValidationError("\(path) exists but cannot be read; fix its permissions (it is never replaced)")
        }
        guard let key = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)), key.count == 32 else {
            throw ValidationError(
                "\(path) exists but does not hold one base64 32-byte key (the stored tokens are sealed under it); restore it or move it away — it is never replaced"
            )
        }
        return key
    }
}
