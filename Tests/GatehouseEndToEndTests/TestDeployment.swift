import Crypto
import CurlClient
import Foundation
import GRDB
import GatehouseCore
import GatehousePostgres
import GatehouseSQLite
import GatehouseServer
import GatehouseTestSupport
import Logging
import ProviderEmulator
import ServiceLifecycle
import Synchronization

/// Runs `body` against a fresh deployment — a gateway and an emulator on loopback ports the
/// kernel picked, in-process, with a fresh SQLite file and captured logs — and always stops
/// both servers before returning or rethrowing, also when `body` throws. Everything between
/// them is real HTTP through libcurl.
///
/// `openID` adjusts the emulator-backed OIDC providers (`oidc.emulator`, `yahoo.com`),
/// `extraProviders` adds more, given the emulator's base URL, and `gateway` adjusts the rest of
/// the configuration last. `database` (a `postgres://` URL) replaces the SQLite file,
/// `instances` gateways share the store, like replicas behind a load balancer, `vaultKeys`
/// gives instance N its encryption keys (default: one key shared by all) and
/// `vaultReloadInterval` how often instances reread the data keys. `dataFolder` holds the SQLite
/// file instead of a fresh temporary folder (the caller removes it). `idleTimeout` is how long
/// the listeners keep a silent connection. `upstreamCalls` gives the gateways a libcurl client of
/// their own holding that many calls in flight and as many waiting, `upstreamCallsPerUser` of
/// one user's, `upstreamCallsReserved` of them kept for `.high` calls (default none) and half of
/// them for one provider's `.high` calls, as `serve` configures it (the tests' own calls use
/// another, unbounded client).
func withDeployment<T>(
    transactionLifetime: TimeInterval = 600,
    profileCacheLifetime: TimeInterval = 0,
    openID: @escaping @Sendable (inout OIDCProviderConfiguration) -> Void = { _ in },
    microsoft: @escaping @Sendable (inout MicrosoftConfiguration) -> Void = { _ in },
    extraProviders: @escaping @Sendable (String) -> [OIDCProviderConfiguration] = { _ in [] },
    gateway: @escaping @Sendable (inout GatewayConfiguration) -> Void = { _ in },
    hooks: (@Sendable (_ emulatorURL: String) -> HookConfiguration)? = nil,
    webhooks: (@Sendable (_ emulatorURL: String) -> WebhookConfiguration)? = nil,
    database: String? = nil,
    instances: Int = 1,
    vaultKeys: (@Sendable (Int) -> [Data])? = nil,
    vaultReloadInterval: TimeInterval = 30,
    databaseTimeout: Duration = .seconds(5),
    databasePoolSize: Int = 8,
    dataFolder: String? = nil,
    idleTimeout: Duration = GatewayService.defaultIdleTimeout,
    upstreamCalls: Int? = nil,
    upstreamCallsPerUser: Int? = nil,
    upstreamCallsReserved: Int = 0,
    _ body: (TestDeployment) async throws -> T
) async throws -> T {
    let folder = try TestScratch.folder("e2e")
    let databasePath = (dataFolder ?? folder) + "/gatehouse.sqlite"
    let logs = LogSink(capture: true)
    let logger = Logger(label: "gatehouse-test") { JSONLogHandler(label: $0, sink: logs) }
    let vaultKey = TokenVault.generateKey()
    let emulator = ProviderEmulator()
    // A safety net against a hung request rather than a measure: tests that time something
    // set their own. The heaviest (twenty simultaneous sign-ins with debug crypto on a loaded
    // 2-core run) have taken single requests past libcurl's 30 s default.
    let client = CurlHTTPClient(configuration: CurlClientConfiguration(timeout: .seconds(120)))
    let metrics = ServerMetrics()
    let gatewayClient =
        upstreamCalls.map {
            CurlHTTPClient(
                configuration: CurlClientConfiguration(
                    upstreamCalls: ($0, upstreamCallsPerUser ?? .max, upstreamCallsReserved), timeout: .seconds(120)))
        }
        ?? client
    if let upstreamCalls { metrics.observeOutbound(calls: upstreamCalls) { gatewayClient.load } }
    let clock = OffsetClock()
    let stores = Mutex<[PostgresStorage]>([])
    // Every listener binds port 0 and reports what it got; configurations that name a URL
    // are assembled from those reports, never from ports picked beforehand.
    let emulatorPort = Eventual<Int>()
    let gatewayPorts = (0..<instances).map { _ in Eventual<Int>() }
    let operationsPorts = (0..<instances).map { _ in Eventual<Int>() }
    var services: [any Service] = [emulator.application(port: 0, logger: logger) { emulatorPort.set($0) }]
    for index in 0..<instances {
        let gatewayService = GatehouseServer.service(
            host: "127.0.0.1", port: 0, operations: OperationsAddress(host: "127.0.0.1", port: 0), idleTimeout: idleTimeout, logger: logger
        ) { port in
            let emulatorURL = "http://127.0.0.1:\(try await emulatorPort.value())"
            // Instances come up one after the other (each migrates the shared store in turn).
            // Replicas behind a load balancer share one public URL: the first instance's
            // stands for it (the issuer of gateway ID tokens and the providers' redirect URI).
            if index > 0 { _ = try await gatewayPorts[index - 1].value() }
            let url = "http://127.0.0.1:\(index == 0 ? port : try await gatewayPorts[0].value())"
            var microsoftConfiguration = MicrosoftConfiguration.emulator(
                baseURL: emulatorURL, clientID: EmulatorConfiguration.demoMicrosoftClient.id,
                clientSecret: EmulatorConfiguration.demoMicrosoftClient.secret)
            microsoft(&microsoftConfiguration)
            var configuration = GatewayConfiguration(
                publicURL: url, returnToAllowList: ["https://app.example.com/signed-in", "\(url)/"], developmentMode: true,
                transactionLifetime: transactionLifetime,
                github: .emulator(
                    baseURL: emulatorURL, clientID: TestDeployment.githubClient.id, clientSecret: TestDeployment.githubClient.secret),
                microsoft: microsoftConfiguration,
                oidcProviders: TestDeployment.openIDProviders(emulatorURL: emulatorURL, adjust: openID) + extraProviders(emulatorURL))
            configuration.profileCacheLifetime = profileCacheLifetime
            configuration.clock = clock
            // The emulator is in-process on a debug build: on a loaded 2-core machine twenty
            // parallel sign-ins (RSA checks at -O0) took the product's 10 s default past its
            // end. Tests that test timeouts set their own.
            configuration.defaultUpstreamTimeout = .seconds(25)
            configuration.hooks = hooks?(emulatorURL)
            configuration.webhooks = webhooks?(emulatorURL)
            configuration.photoBytes = PhotoBuffer.joining
            gateway(&configuration)
            // Each instance has its own store object (its own pool), as separate processes would.
            let storage: any GatehouseStorage
            if let database {
                let postgres = try PostgresStorage(
                    url: database, maximumConnections: databasePoolSize, operationTimeout: databaseTimeout, logger: logger)
                stores.withLock { $0.append(postgres) }
                storage = postgres
            } else {
                storage = try SQLiteStorage(path: databasePath)
            }
            try await storage.migrate()
            let gatehouse = try Gatehouse(
                configuration: configuration, storage: storage,
                vault: try TokenVault(keys: vaultKeys?(index) ?? [vaultKey], store: storage, reloadInterval: vaultReloadInterval, clock: clock),
                http: gatewayClient,
                metrics: index == 0 ? metrics.core : .disabled, logger: logger)
            return GatewayAssembly(gatehouse: gatehouse, metrics: index == 0 ? metrics : ServerMetrics(), demoPage: true)
        } onRunning: {
            gatewayPorts[index].set($0)
        } onOperationsRunning: {
            operationsPorts[index].set($0)
        }
        services.append(gatewayService)
    }
    var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [], logger: logger)
    // A test that left a request hanging must not hold the shutdown: after 10 s the servers
    // are cancelled.
    configuration.maximumGracefulShutdownDuration = .seconds(10)
    let group = ServiceGroup(configuration: configuration)
    defer {
        client.shutdown()
        gatewayClient.shutdown()
        for store in stores.withLock({ $0 }) { store.shutdown() }
        try? FileManager.default.removeItem(atPath: folder)
    }
    // How the servers ended: `nil` after a requested shutdown, else their error.
    let ended = Eventual<(any Error)?>()
    Task {
        let stopped: any Error
        do {
            try await group.run()
            stopped = FlowError("the deployment stopped")
        } catch {
            stopped = error
        }
        // Whoever still waits for a port learns why it will never come.
        emulatorPort.fail(stopped)
        for port in gatewayPorts + operationsPorts { port.fail(stopped) }
        ended.set(stopped is FlowError ? nil : stopped)
    }
    let outcome: Result<T, any Error>
    do {
        let emulatorURL = "http://127.0.0.1:\(try await emulatorPort.value())"
        var gatewayURLs: [String] = []
        for port in gatewayPorts { gatewayURLs.append("http://127.0.0.1:\(try await port.value())") }
        var operationsURLs: [String] = []
        for port in operationsPorts { operationsURLs.append("http://127.0.0.1:\(try await port.value())") }
        let deployment = TestDeployment(
            gatewayURLs: gatewayURLs, operationsURLs: operationsURLs, emulatorURL: emulatorURL, databasePath: databasePath, vaultKey: vaultKey,
            logs: logs,
            emulator: emulator, client: client, metrics: metrics, clock: clock)
        outcome = .success(try await body(deployment))
    } catch {
        outcome = .failure(error)
    }
    await group.triggerGracefulShutdown()
    // Bounded: servers that do not stop fail the test (and are left behind) rather than
    // hang the suite or crash the test process. A stop takes a fraction of a second unloaded;
    // 30 s was outlasted with the machine's cores shared three times over.
    let stopped = try await withThrowingTaskGroup(of: Bool.self) { race in
        race.addTask {
            if let failure = try await ended.value() { throw failure }
            return true
        }
        race.addTask {
            try await Task.sleep(for: .seconds(90))
            return false
        }
        defer { race.cancelAll() }
        return try await race.next() ?? false
    }
    guard stopped else { throw FlowError("the deployment did not stop within 90 s of its shutdown") }
    return try outcome.get()
}

/// A running deployment, handed to the body of `withDeployment`.
final class TestDeployment: Sendable {
    /// The first gateway instance (the only one unless `instances` was given).
    let gatewayURL: String
    /// The first instance's operations listener (`/metrics`, the detailed `/readyz`).
    let operationsURL: String
    /// Every instance's operations listener.
    let operationsURLs: [String]
    /// Every gateway instance, sharing one store and one encryption key.
    let gatewayURLs: [String]
    /// The emulator's base URL.
    let emulatorURL: String
    /// The SQLite file (SQLite deployments only).
    let databasePath: String
    /// The encryption key every instance shares (unless `vaultKeys` was given).
    let vaultKey: Data
    /// Every log line of the deployment.
    let logs: LogSink
    /// The emulator, for its issued tokens.
    let emulator: ProviderEmulator
    /// The client the tests (and the gateways) use.
    let client: CurlHTTPClient
    /// The gateway's metrics (what `/metrics` renders).
    let metrics: ServerMetrics
    /// Every instance's clock: tests advance it past a lifetime instead of sleeping.
    let clock: OffsetClock

    static let githubClient = EmulatorConfiguration.demoGitHubClient
    static let microsoftClient = EmulatorConfiguration.demoMicrosoftClient
    static let returnTo = "https://app.example.com/signed-in"

    fileprivate init(
        gatewayURLs: [String], operationsURLs: [String], emulatorURL: String, databasePath: String, vaultKey: Data, logs: LogSink,
        emulator: ProviderEmulator,
        client: CurlHTTPClient, metrics: ServerMetrics, clock: OffsetClock
    ) {
        self.clock = clock
        self.gatewayURLs = gatewayURLs
        self.gatewayURL = gatewayURLs[0]
        self.operationsURLs = operationsURLs
        self.operationsURL = operationsURLs[0]
        self.emulatorURL = emulatorURL
        self.databasePath = databasePath
        self.vaultKey = vaultKey
        self.logs = logs
        self.emulator = emulator
        self.client = client
        self.metrics = metrics
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
        try await openSQLite(databasePath).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM accounts") ?? -1 }
    }

    /// A JSON POST to the emulator's control path.
    @discardableResult
    func control(_ path: String, _ json: String) async throws -> OutboundResponse {
        try await client.execute(
            OutboundRequest(
                method: "POST", url: "\(emulatorURL)/_emulator/\(path)", headers: ["Content-Type": "application/json"], body: Array(json.utf8)))
    }

    /// The detailed `/readyz` (its JSON; a problem document while not ready) once `condition`
    /// holds of it, asked every 50 ms for 20 s at most (then the last answer). A provider answers
    /// readiness within half a second, and a loaded machine may finish a cold cache's discovery
    /// fetch after that: the fetch goes on and fills the cache for a later probe.
    func readiness(until condition: ([String: Any]) -> Bool) async throws -> [String: Any] {
        var answer: [String: Any] = [:]
        for _ in 0..<400 {
            answer = try jsonObject(try await client.execute(OutboundRequest(url: "\(operationsURL)/readyz")))
            if condition(answer) { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return answer
    }

    /// The emulator's call counts by `METHOD path`.
    func emulatorStats() async throws -> [String: Int] {
        let response = try await client.execute(OutboundRequest(url: "\(emulatorURL)/_emulator/stats"))
        return try JSONDecoder().decode([String: Int].self, from: Data(response.body))
    }

    /// Holds the sample app's next answer at `endpoint` (a hook's `POST /sample-app/hooks/…`)
    /// for at most `milliseconds`, then answers it `answer` (status 200); `faults/release`
    /// answers it at once. Runs `call` and returns its task once the call has reached the
    /// held endpoint (so the gateway is waiting for the answer).
    func holdingHook<Answer: Sendable>(
        _ endpoint: String, milliseconds: Int, answer: String = #"{"decision":"allow"}"#, _ call: @escaping @Sendable () async throws -> Answer
    ) async throws -> Task<Answer, any Error> {
        let asked = try await emulatorStats()[endpoint] ?? 0
        let hold: [String: Any] = ["endpoint": endpoint, "status": 200, "holdMs": milliseconds, "times": 1, "body": answer]
        let armed = try await control("faults", String(decoding: try JSONSerialization.data(withJSONObject: hold), as: UTF8.self))
        guard armed.status == 201 else { throw FlowError("the emulator refused the hold: \(armed.status) \(armed.bodyText)") }
        let task = Task { try await call() }
        // Bounds a failure only: a sign-in that runs every suite's turn on a loaded machine
        // reached its hook after more than 20 s in a full run beside two busy loops.
        let deadline = ContinuousClock.now + .seconds(60)
        while try await emulatorStats()[endpoint] ?? 0 == asked, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        guard try await emulatorStats()[endpoint] ?? 0 > asked else {
            task.cancel()
            throw FlowError("the call did not reach \(endpoint) within 60 s")
        }
        return task
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

/// A result verifier and its challenge, computed here independently of the gateway's code:
/// base64url(SHA-256(verifier)), no padding (RFC 7636's S256).
struct ResultKey {
    let verifier: String
    let challenge: String

    init(verifier: String = Self.base64url(Data((0..<32).map { _ in UInt8.random(in: 0...255) }))) {
        self.verifier = verifier
        challenge = Self.base64url(Data(SHA256.hash(data: Data(verifier.utf8))))
    }

    static func base64url(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// Drives the sign-in flow like a browser would.
struct Browser {
    let deployment: TestDeployment
    var jar = CookieJar()
    /// The verifier of the last flow started (the page keeps it, as the demo page does in sessionStorage).
    var resultKey = ResultKey()
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

    /// Start with `query` (plus a fresh `result_challenge` unless the query has one), returning
    /// the provider's authorize URL. The navigation leaves the page as a browser's does: with the
    /// page's origin as its `Referer`.
    mutating func start(_ query: String, provider: String = "github.com") async throws -> OutboundResponse {
        var query = query
        if !query.contains("result_challenge=") {
            resultKey = ResultKey()
            query += "&result_challenge=\(resultKey.challenge)"
        }
        let referer: OutboundHeaders = origin.map { ["Referer": "\($0)/"] } ?? [:]
        return try await send("\(deployment.gatewayURL)/v1/auth/\(provider)/start?\(query)", headers: referer)
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

    /// `POST /v1/auth/result` with the verifier of the flow this browser started last.
    mutating func result(_ id: String, on instance: String? = nil) async throws -> OutboundResponse {
        try await send(
            "\(instance ?? deployment.gatewayURL)/v1/auth/result", method: "POST", headers: ["Content-Type": "application/json"],
            body: Array(#"{"result":"\#(id)","result_verifier":"\#(resultKey.verifier)"}"#.utf8))
    }
}

/// A deployment's SQLite file opened beside its gateway. Writes (and reads that must see
/// them) wait up to 10 s for the gateway's own transactions (a sign-in, the webhook worker's
/// polls) instead of failing at once with "database is locked", as they did on a loaded run.
func openSQLite(_ path: String) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.busyMode = .timeout(10)
    return try DatabaseQueue(path: path, configuration: configuration)
}

/// A whole GitHub sign-in as octocat against a gateway outside `withDeployment` (a child
/// process), with a cookie jar of its own: start → emulator → callback → result. When the
/// gateway's public URL is another (replicas behind a load balancer), the provider's redirect
/// to `publicURL` is sent on to `gateway`. The jar and the result's JSON.
func headlessSignIn(
    client: CurlHTTPClient, gateway: String, returnTo: String, publicURL: String? = nil
) async throws -> (CookieJar, [String: Any]) {
    var jar = CookieJar()
    func send(_ url: String, method: String = "GET", body: String? = nil) async throws -> OutboundResponse {
        var headers = jar.header
        if body != nil { headers.add("Content-Type", "application/json") }
        let response = try await client.execute(OutboundRequest(method: method, url: url, headers: headers, body: body.map { Array($0.utf8) }))
        jar.store(from: response)
        return response
    }
    let key = ResultKey()
    let start = try await send(
        "\(gateway)/v1/auth/github.com/start?return_to=\(FormEncoding.escape(returnTo))&login=octocat&result_challenge=\(key.challenge)")
    guard start.status == 302, let authorize = start.headers["location"] else { throw FlowError("start \(start.status) \(start.bodyText)") }
    let approved = try await client.execute(OutboundRequest(url: authorize))
    guard var callback = approved.headers["location"] else { throw FlowError("authorize \(approved.status)") }
    if let publicURL {
        guard callback.hasPrefix(publicURL) else { throw FlowError("the provider redirected elsewhere") }
        callback = gateway + callback.dropFirst(publicURL.count)
    }
    let returned = try await send(callback)
    guard returned.status == 303, let location = returned.headers["location"], let marker = location.range(of: "#gatehouse_result=") else {
        throw FlowError("callback \(returned.status) \(returned.bodyText)")
    }
    let result = try await send(
        "\(gateway)/v1/auth/result", method: "POST",
        body: #"{"result":"\#(location[marker.upperBound...])","result_verifier":"\#(key.verifier)"}"#)
    guard result.status == 200 else { throw FlowError("result \(result.status)") }
    return (jar, try jsonObject(result))
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
        try SQLiteStorage(path: try TestScratch.folder("spec") + "/gatehouse.sqlite")
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
