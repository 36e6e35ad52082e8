import Crypto
import CurlClient
import Foundation
import GatehouseCore
import GatehouseSQLite
import GatehouseServer
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import ProviderEmulator
import Synchronization

/// What every allocation benchmark runs against, built once before the first one, all in this
/// process on loopback ports the kernel picked: the provider emulator; an upstream that answers
/// the passthrough's 2 KB of JSON from memory, as bench.py's nginx does (the emulator builds its
/// repository pages on every call, which would be most of the count); a gateway core over a
/// fresh SQLite file, signing in at the emulator's GitHub and passing GitHub API calls to the
/// upstream; the gateway's whole router as an `Application`; and one signed-in user (octocat)
/// with a session and a service key. Logs are the gateway's JSON lines at `info` on standard
/// error, as `serve` writes them: their cost is part of every request's.
struct Fixture: Sendable {
    /// Where the result of every sign-in is sent (the allow-list's one entry).
    static let returnTo = "https://app.example.com/signed-in"
    /// The gateway's public URL: the prefix of the callback URLs the emulator redirects to.
    /// Nothing listens there: the benchmarks hand those paths to the test client.
    static let publicURL = "http://127.0.0.1:9"

    /// The gateway's router as an application, for `test(.router)` and `test(.live)`.
    let application: Application<RouterResponder<GatehouseRequestContext>>
    /// The gateway's libcurl client; the benchmarks follow the emulator's redirects with it too.
    let http: CurlHTTPClient
    /// octocat's account id.
    let uid: String
    /// `Cookie: gatehouse-session=…` of octocat's session.
    let sessionCookie: String
    /// A service key's secret, scoped to the GitHub API passthrough.
    let serviceKey: String

    private static let built = Mutex<Fixture?>(nil)

    /// The fixture `start()` built.
    static var shared: Fixture {
        get throws {
            guard let fixture = built.withLock({ $0 }) else { throw BenchmarkFailure("the fixture was not started") }
            return fixture
        }
    }

    /// Starts the emulator, assembles the gateway over it and signs octocat in once (which
    /// creates the account, so that the sign-in benchmark measures a returning user).
    /// The runner calls its set-up hook before each benchmark; the fixture is built once.
    static func start() async throws {
        guard built.withLock({ $0 }) == nil else { return }
        let sink = LogSink(capture: false)
        LoggingSystem.bootstrap { JSONLogHandler(label: $0, sink: sink) }
        let logger = Logger(label: "gatehouse")
        let emulatorURL = "http://127.0.0.1:\(try await startEmulator(logger: logger))"
        let upstreamURL = "http://127.0.0.1:\(try await startUpstream(logger: logger))"
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-allocations-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        // The runner ends the process when the last benchmark is done: the folder goes then.
        temporaryFolder.withLock { $0 = folder }
        atexit {
            if let folder = temporaryFolder.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: folder) }
        }
        var configuration = GatewayConfiguration(
            publicURL: publicURL, returnToAllowList: [returnTo], developmentMode: true,
            github: .emulator(
                baseURL: emulatorURL, clientID: EmulatorConfiguration.demoGitHubClient.id,
                clientSecret: EmulatorConfiguration.demoGitHubClient.secret))
        // Every benchmark repeats one caller's request hundreds of times a second.
        configuration.authRateLimitPerMinute = 0
        configuration.userRateLimitPerMinute = 0
        configuration.serviceRateLimitPerMinute = 0
        configuration.api = APIPolicy(providers: ["github.com": .init(baseURL: upstreamURL, allow: [try APITemplate("GET /user/repos")])])
        let storage = try SQLiteStorage(path: folder + "/gatehouse.sqlite")
        try await storage.migrate()
        let http = CurlHTTPClient()
        let gatehouse = try Gatehouse(
            configuration: configuration, storage: storage, vault: try TokenVault(keys: [TokenVault.generateKey()], store: storage),
            http: http, logger: logger)
        let assembly = GatewayAssembly(gatehouse: gatehouse, metrics: ServerMetrics(), demoPage: false)
        let application = Application(router: GatehouseServer.router(for: assembly, logger: logger), logger: logger)
        let (_, serviceKey) = try await gatehouse.serviceKeys.create(name: "allocations", scopes: ["api:github.com"])
        let signedIn = try await application.test(.router) { client in try await SignIn.run(client: client, http: http) }
        let fixture = Fixture(
            application: application, http: http, uid: signedIn.uid, sessionCookie: signedIn.sessionCookie, serviceKey: serviceKey)
        built.withLock { $0 = fixture }
    }

    /// Runs the emulator for the rest of the process and answers the port it got.
    private static func startEmulator(logger: Logger) async throws -> Int {
        try await serving("the emulator") { onRunning in ProviderEmulator().application(port: 0, logger: logger, onRunning: onRunning) }
    }

    /// Runs the upstream for the rest of the process and answers the port it got.
    private static func startUpstream(logger: Logger) async throws -> Int {
        let repositories = ByteBuffer(string: upstreamRepositories)
        let router = Router()
        router.get("/user/repos") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8"], body: ResponseBody(byteBuffer: repositories))
        }
        return try await serving("the upstream") { onRunning in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) }, logger: logger)
        }
    }

    /// The upstream's answer: eight repositories, 1.9 KB of JSON.
    static let upstreamRepositories =
        "["
        + (1...8).map { index in
            #"{"id":\#(index),"name":"repository-\#(index)","full_name":"octocat/repository-\#(index)","private":false,"#
                + #""html_url":"https://github.com/octocat/repository-\#(index)","description":"One of the benchmark's eight","#
                + #""fork":false,"language":"Swift","stargazers_count":\#(index * 7)}"#
        }.joined(separator: ",") + "]"

    /// Runs the application `make` builds (given the callback that reports its port) in a task
    /// of its own for the rest of the process; answers the port once it serves.
    private static func serving<App: ApplicationProtocol>(
        _ name: String, _ make: (@escaping @Sendable (Int) async -> Void) -> App
    ) async throws -> Int {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let application = make { port in continuation.yield(port) }
        Task {
            do { try await application.runService() } catch { continuation.finish() }
        }
        guard let port = await ports.first(where: { _ in true }), port > 0 else { throw BenchmarkFailure("\(name) did not start") }
        return port
    }
}

/// The fixture's SQLite folder, removed at exit.
private let temporaryFolder = Mutex<String?>(nil)

/// A benchmark's request did not get the answer it should have: the run stops, since counting
/// the allocations of a failure would measure something else.
struct BenchmarkFailure: Error, CustomStringConvertible {
    /// What went wrong.
    let description: String
    /// A failure saying `description`.
    init(_ description: String) { self.description = description }
}

/// Runs `body`; a failure is printed and ends the process with status 1. The runner's
/// standalone mode drops a failed benchmark without a word and exits 0, which would let a
/// broken benchmark pass for one that allocates nothing.
func stoppingOnFailure(_ what: String, _ body: () async throws -> Void) async {
    do {
        try await body()
    } catch {
        FileHandle.standardError.write(Data("gatehouse-bench-allocations: \(what): \(error)\n".utf8))
        exit(1)
    }
}

/// Checks an answer's status.
func require(_ response: TestResponse, _ status: HTTPResponse.Status, _ what: String) throws {
    guard response.status == status else {
        throw BenchmarkFailure("\(what) answered \(response.status.code): \(String(buffer: response.body).prefix(300))")
    }
}
