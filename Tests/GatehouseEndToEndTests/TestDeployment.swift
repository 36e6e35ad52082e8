import CurlClient
import Foundation
import GRDB
import GatehouseCore
import GatehousePostgres
import GatehouseSQLite
import GatehouseServer
import Logging
import ProviderEmulator
import ServiceLifecycle

/// A gateway and an emulator on loopback ports, in-process, with a fresh SQLite file and
/// captured logs. Everything between them is real HTTP through libcurl.
final class TestDeployment: Sendable {
    /// The first gateway instance (the only one unless `instances` was given).
    let gatewayURL: String
    /// Every gateway instance, sharing one store and one encryption key.
    let gatewayURLs: [String]
    let emulatorURL: String
    let databasePath: String
    /// The encryption key every instance shares (unless `vaultKeys` was given).
    let vaultKey = TokenVault.generateKey()
    let logs = LogSink(capture: true)
    let emulator = ProviderEmulator()
    let client = CurlHTTPClient()
    /// The gateway's metrics (what `/metrics` renders).
    let metrics = ServerMetrics()
    private let group: ServiceGroup

    static let githubClient = EmulatorConfiguration.demoGitHubClient
    static let microsoftClient = EmulatorConfiguration.demoMicrosoftClient
    static let returnTo = "https://app.example.com/signed-in"

    /// Starts a deployment; `openID` adjusts the emulator-backed OIDC providers (`oidc.emulator`,
    /// `yahoo.com`), `extraProviders` adds more, given the emulator's base URL, and `gateway`
    /// adjusts the rest of the configuration last. `database` (a `postgres://` URL) replaces
    /// the SQLite file, `instances` gateways share the store, like replicas behind a load balancer,
    /// `vaultKeys` gives instance N its encryption keys (default: one key shared by all) and
    /// `vaultReloadInterval` how often instances reread the data keys.
    init(
        transactionLifetime: TimeInterval = 600,
        profileCacheLifetime: TimeInterval = 0,
        openID: @Sendable (inout OIDCProviderConfiguration) -> Void = { _ in },
        microsoft: @Sendable (inout MicrosoftConfiguration) -> Void = { _ in },
        extraProviders: @Sendable (String) -> [OIDCProviderConfiguration] = { _ in [] },
        gateway: @Sendable (inout GatewayConfiguration) -> Void = { _ in },
        database: String? = nil,
        instances: Int = 1,
        vaultKeys: (@Sendable (Int) -> [Data])? = nil,
        vaultReloadInterval: TimeInterval = 30,
        databaseTimeout: Duration = .seconds(5)
    ) async throws {
        let gatewayPorts = try (0..<instances).map { _ in try LoopbackPort.pick() }
        let emulatorPort = try LoopbackPort.pick()
        gatewayURLs = gatewayPorts.map { "http://127.0.0.1:\($0)" }
        gatewayURL = gatewayURLs[0]
        emulatorURL = "http://127.0.0.1:\(emulatorPort)"
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-e2e-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        databasePath = folder + "/gatehouse.sqlite"
        let sink = logs
        let logger = Logger(label: "gatehouse-test") { JSONLogHandler(label: $0, sink: sink) }
        let vaultKey = self.vaultKey
        var microsoftConfiguration = MicrosoftConfiguration.emulator(
            baseURL: "http://127.0.0.1:\(emulatorPort)", clientID: EmulatorConfiguration.demoMicrosoftClient.id,
            clientSecret: EmulatorConfiguration.demoMicrosoftClient.secret)
        microsoft(&microsoftConfiguration)
        var services: [any Service] = [emulator.application(port: emulatorPort, logger: logger)]
        for (index, port) in gatewayPorts.enumerated() {
            // Replicas behind a load balancer share one public URL: the first instance's stands
            // for it (the issuer of gateway ID tokens and the providers' redirect URI).
            let url = gatewayURLs[0]
            var configuration = GatewayConfiguration(
                publicURL: url, returnToAllowList: ["https://app.example.com/signed-in", "\(url)/"], developmentMode: true,
                transactionLifetime: transactionLifetime,
                github: .emulator(baseURL: emulatorURL, clientID: Self.githubClient.id, clientSecret: Self.githubClient.secret),
                microsoft: microsoftConfiguration,
                oidcProviders: Self.openIDProviders(emulatorURL: emulatorURL, adjust: openID) + extraProviders(emulatorURL))
            configuration.profileCacheLifetime = profileCacheLifetime
            gateway(&configuration)
            // Each instance has its own store object (its own pool), as separate processes would.
            let storage: any GatehouseStorage =
                if let database {
                    try PostgresStorage(url: database, maximumConnections: 8, operationTimeout: databaseTimeout, logger: logger)
                } else {
                    try SQLiteStorage(path: databasePath)
                }
            try await storage.migrate()
            let gatehouse = try Gatehouse(
                configuration: configuration, storage: storage,
                vault: try TokenVault(keys: vaultKeys?(index) ?? [vaultKey], reloadInterval: vaultReloadInterval), http: client,
                metrics: index == 0 ? metrics.core : .disabled, logger: logger)
            services.append(
                GatehouseServer.application(
                    gatehouse: gatehouse, metrics: index == 0 ? metrics : ServerMetrics(), host: "127.0.0.1", port: port, demoPage: true,
                    logger: logger))
        }
        group = ServiceGroup(services: services, gracefulShutdownSignals: [], logger: logger)
        let group = self.group
        Task { try await group.run() }
        for url in gatewayURLs.map({ "\($0)/healthz" }) + ["\(emulatorURL)/"] {
            var ready = false
            // Bounded, but generous: a loaded 2-core CI machine can take seconds to start both servers.
            for _ in 0..<400 where !ready {
                ready = (try? await client.execute(OutboundRequest(url: url)))?.status == 200
                if !ready { try await Task.sleep(for: .milliseconds(50)) }
            }
            guard ready else { throw FlowError("\(url) did not come up") }
        }
    }

    /// The emulator's standard issuer and Yahoo, with the demo clients.
    static func openIDProviders(emulatorURL: String, adjust: (inout OIDCProviderConfiguration) -> Void) -> [OIDCProviderConfiguration] {
        let oidc = EmulatorConfiguration.demoOIDCClient
        let yahoo = EmulatorConfiguration.demoYahooClient
        var providers: [OIDCProviderConfiguration] = [
            .emulatorIssuer(baseURL: emulatorURL, clientID: oidc.id, clientSecret: oidc.secret),
            .emulatorYahoo(baseURL: emulatorURL, clientID: yahoo.id, clientSecret: yahoo.secret),
        ]
        for index in providers.indices { adjust(&providers[index]) }
        return providers
    }

    /// The number of accounts in the SQLite file (SQLite deployments only).
    func accountCount() async throws -> Int {
        try await DatabaseQueue(path: databasePath).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM accounts") ?? -1 }
    }

    /// A JSON POST to the emulator's control path.
    @discardableResult
    func control(_ path: String, _ json: String) async throws -> OutboundResponse {
        try await client.execute(
            OutboundRequest(
                method: "POST", url: "\(emulatorURL)/_emulator/\(path)", headers: ["Content-Type": "application/json"], body: Array(json.utf8)))
    }

    func stop() async {
        await group.triggerGracefulShutdown()
        client.shutdown()
    }

    /// The emulator's call counts by `METHOD path`.
    func emulatorStats() async throws -> [String: Int] {
        let response = try await client.execute(OutboundRequest(url: "\(emulatorURL)/_emulator/stats"))
        return try JSONDecoder().decode([String: Int].self, from: Data(response.body))
    }
}

/// A browser's cookie jar, as curl's `-b/-c` would keep it.
struct CookieJar {
    private(set) var cookies: [String: String] = [:]

    mutating func store(from response: OutboundResponse) {
        for header in response.headers.values("set-cookie") {
            let pair = header.split(separator: ";", maxSplits: 1)[0].split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(pair[0]).trimmingCharacters(in: .whitespaces)
            let value = pair.count > 1 ? String(pair[1]) : ""
            let maxAgeZero = header.lowercased().contains("max-age=0")
            cookies[name] = maxAgeZero || value.isEmpty ? nil : value
        }
    }

    var header: OutboundHeaders {
        cookies.isEmpty ? [:] : ["Cookie": cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")]
    }
}

/// Drives the sign-in flow like a browser would.
struct Browser {
    let deployment: TestDeployment
    var jar = CookieJar()
    /// The page's origin, sent on every non-GET request as browsers do (`nil`: a non-browser
    /// client, or a cross-site form whose origin the test sets itself).
    var origin: String? = "https://app.example.com"

    init(_ deployment: TestDeployment) { self.deployment = deployment }

    /// A request with the jar's cookies; stores the answer's cookies.
    mutating func send(_ url: String, method: String = "GET", headers: OutboundHeaders = [:], body: [UInt8]? = nil) async throws
        -> OutboundResponse
    {
        var all = jar.header
        if method != "GET", let origin, !headers.contains(where: { $0.name.lowercased() == "origin" }) { all.add("Origin", origin) }
        for field in headers { all.add(field.name, field.value) }
        let response = try await deployment.client.execute(OutboundRequest(method: method, url: url, headers: all, body: body))
        jar.store(from: response)
        return response
    }

    /// Start with `query`, returning the provider's authorize URL.
    mutating func start(_ query: String, provider: String = "github.com") async throws -> OutboundResponse {
        try await send("\(deployment.gatewayURL)/v1/auth/\(provider)/start?\(query)")
    }

    /// Runs start → authorize (auto-approve through the provider's hint parameter: GitHub's
    /// `login`, everyone else's `login_hint`) and returns the callback URL the emulator chose.
    mutating func authorize(login: String, provider: String = "github.com", mode: String = "signin") async throws -> String {
        let returnTo = FormEncoding.escape(TestDeployment.returnTo)
        let hint = provider == "github.com" ? "login" : "login_hint"
        let start = try await start("return_to=\(returnTo)&\(hint)=\(FormEncoding.escape(login))&mode=\(mode)", provider: provider)
        guard start.status == 302, let authorize = start.headers["location"] else {
            throw FlowError("start answered \(start.status): \(start.bodyText)")
        }
        let approved = try await deployment.client.execute(OutboundRequest(url: authorize))
        guard approved.status == 302, let callback = approved.headers["location"] else { throw FlowError("authorize answered \(approved.status)") }
        return callback
    }

    /// The whole flow for a seeded user: returns the result id.
    mutating func signIn(login: String, provider: String = "github.com", mode: String = "signin") async throws -> String {
        let callback = try await send(try await authorize(login: login, provider: provider, mode: mode))
        guard callback.status == 303, let location = callback.headers["location"], let range = location.range(of: "#gatehouse_result=") else {
            throw FlowError("callback answered \(callback.status): \(callback.bodyText)")
        }
        return String(location[range.upperBound...])
    }

    /// `POST /v1/auth/result`.
    mutating func result(_ id: String) async throws -> OutboundResponse {
        try await send(
            "\(deployment.gatewayURL)/v1/auth/result", method: "POST", headers: ["Content-Type": "application/json"],
            body: Array(#"{"result":"\#(id)"}"#.utf8))
    }
}

struct FlowError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Parses a JSON object answer.
func jsonObject(_ response: OutboundResponse) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else {
        throw FlowError("not a JSON object: \(response.bodyText)")
    }
    return object
}

/// A throwaway SQLite store for tests that only need a `Gatehouse` value.
enum GatehouseSQLiteStorageForSpec {
    static func make() throws -> SQLiteStorage {
        try SQLiteStorage(path: FileManager.default.temporaryDirectory.appendingPathComponent("spec-\(UUID().uuidString).sqlite").path)
    }

    /// A fresh, migrated store.
    static func migrated() async throws -> SQLiteStorage {
        let storage = try make()
        try await storage.migrate()
        return storage
    }

    /// A second connection to a deployment's database file (as `gatehouse keys` opens it).
    static func open(_ path: String) throws -> SQLiteStorage {
        try SQLiteStorage(path: path)
    }
}
