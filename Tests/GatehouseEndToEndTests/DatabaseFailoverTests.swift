import CurlClient
import Foundation
import GatehouseCore
import GatehouseTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue #21: two `gatehouse serve` processes on one PostgreSQL server that crashes under
/// load, as an operator's failover would.
@Suite("Database failover")
struct DatabaseFailoverTests {
    /// One refresh-token chain: the token the client holds and what its last answer was.
    struct Chain: Sendable {
        var refreshToken: String
        var idToken: String
        var lastStatus = 200
    }

    /// Everything the load saw.
    actor Record {
        var chains: [Chain]
        var statuses: [Int: Int] = [:]
        var unexpected: [String] = []
        var rotations = 0

        init(_ chains: [Chain]) { self.chains = chains }

        func update(_ index: Int, _ chain: Chain) { chains[index] = chain }
        func saw(_ status: Int) {
            statuses[status, default: 0] += 1
            if status == 200 { rotations += 1 }
        }
        func odd(_ line: String) { unexpected.append(line) }
    }

    @Test(
        "PostgreSQL crashed three times (-m immediate) under load on two serve instances: only 200/503 answers, every chain whose last answer was 200 or 503 rotates on either instance, readiness follows the database within seconds (about half a second idle), SIGTERM ends both in time"
    )
    func crashCyclesUnderLoad() async throws {
        try await HeavyTests.gate.exclusive {
            try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
            let cluster = try await PostgresCluster()
            defer { cluster.destroy() }
            try await cluster.start()
            try await withEmulatorAndFolder("gatehouse-failover") { emulatorURL, folder in
                let key = TokenVault.generateKey()
                let a = try await ServeProcess.start(name: "a", database: cluster.url, emulatorURL: emulatorURL, key: key, folder: folder)
                defer { a.process.stop() }
                let b = try await ServeProcess.start(name: "b", database: cluster.url, emulatorURL: emulatorURL, key: key, folder: folder)
                defer { b.process.stop() }
                let client = CurlHTTPClient()
                defer { client.shutdown() }

                // Six clients sign in on A.
                var chains: [Chain] = []
                for _ in 0..<6 { chains.append(try await Self.signIn(client: client, gateway: a.url)) }
                let record = Record(chains)
                let stop = Flag()
                // ... and rotate their refresh tokens on B, keeping the token on anything but a 200.
                let load = (0..<6).map { index in
                    Task {
                        for _ in 0..<20_000 where !stop.isSet {
                            var chain = await record.chains[index]
                            let answer: OutboundResponse
                            do {
                                answer = try await Self.refresh(client: client, gateway: b.url, chain.refreshToken)
                            } catch {
                                await record.odd("client \(index): \(error)")
                                return
                            }
                            await record.saw(answer.status)
                            chain.lastStatus = answer.status
                            if answer.status == 200, let json = try? jsonObject(answer), let next = json["refreshToken"] as? String,
                                let idToken = json["idToken"] as? String
                            {
                                chain.refreshToken = next
                                chain.idToken = idToken
                            } else if answer.status != 503 {
                                await record.odd("client \(index): \(answer.status) \(answer.bodyText.prefix(200))")
                            }
                            await record.update(index, chain)
                            try? await Task.sleep(for: .milliseconds(50))
                        }
                    }
                }

                var downAfter: [Duration] = []
                var upAfter: [Duration] = []
                for _ in 0..<3 {
                    let before = await record.rotations
                    for _ in 0..<500 where await record.rotations < before + 15 { try await Task.sleep(for: .milliseconds(20)) }
                    try await cluster.crash()
                    downAfter.append(try await Self.readiness(of: [a.url, b.url], is: 503, client: client))
                    // A scrape checks readiness itself: the gauges say why the instance is out.
                    let down = try await Self.readinessGauges(of: a, client: client)
                    #expect(down == ["gatehouse_ready": 0, "gatehouse_storage_reachable": 0], "\(down)")
                    // The database stays away for two seconds, then comes back.
                    try await Task.sleep(for: .seconds(2))
                    try await cluster.start()
                    upAfter.append(try await Self.readiness(of: [a.url, b.url], is: 200, client: client))
                    let up = try await Self.readinessGauges(of: a, client: client)
                    #expect(up == ["gatehouse_ready": 1, "gatehouse_storage_reachable": 1], "\(up)")
                }
                let settled = await record.rotations
                for _ in 0..<500 where await record.rotations < settled + 15 { try await Task.sleep(for: .milliseconds(20)) }
                stop.set()
                for task in load { await task.value }

                let statuses = await record.statuses
                let unexpected = await record.unexpected
                #expect(unexpected.isEmpty, "\(unexpected.prefix(5))")
                #expect(Set(statuses.keys).isSubset(of: [200, 503]), "\(statuses)")
                #expect(statuses[503, default: 0] > 0, "the outages were seen: \(statuses)")
                // Readiness follows the database each way: about half a second on an idle
                // machine (the ping's limit); 1.2 s was seen once under the whole suite's load,
                // so the bound is 3 s, far below the 5 s database timeout a full wait would take.
                let holds = downAfter.allSatisfy { $0 <= .seconds(3) }
                #expect(holds, "\(downAfter)")
                let holds2 = upAfter.allSatisfy { $0 <= .seconds(3) }
                #expect(holds2, "\(upAfter)")
                // Every chain rotates on either instance, and every account answers /v1/me.
                for (index, chain) in await record.chains.enumerated() {
                    #expect([200, 503].contains(chain.lastStatus))
                    let onA = try await Self.refreshRetryingUnavailable(client: client, gateway: a.url, chain.refreshToken)
                    #expect(onA.status == 200, "chain \(index) on A: \(onA.status) \(onA.bodyText)")
                    guard onA.status == 200, let next = try jsonObject(onA)["refreshToken"] as? String else { continue }
                    let onB = try await Self.refreshRetryingUnavailable(client: client, gateway: b.url, next)
                    #expect(onB.status == 200, "chain \(index) on B: \(onB.status) \(onB.bodyText)")
                    let idToken = try #require(try jsonObject(onB)["idToken"] as? String)
                    for gateway in [a.url, b.url] {
                        let me = try await client.execute(OutboundRequest(url: "\(gateway)/v1/me", headers: ["Authorization": "Bearer \(idToken)"]))
                        #expect(me.status == 200, "chain \(index): /v1/me \(me.status)")
                    }
                }
                // Both recovered without a restart, and both stop on SIGTERM within their shutdown
                // timeout (5 s), exit code 0, whatever the database did before.
                #expect(a.process.isRunning && b.process.isRunning)
                for instance in [a, b] { kill(instance.process.pid, SIGTERM) }
                for instance in [a, b] {
                    let status = try await Self.exit(of: instance.process, within: .seconds(10))
                    #expect(status.map(SpawnedProcess.exitCode) == 0, "\(instance.name): \(String(describing: status)) \(instance.logTail)")
                }
            }
        }
    }

    @Test(
        "SIGTERM with a request stuck on a slow provider: the process ends within GATEHOUSE_SHUTDOWN_TIMEOUT (2 s here), exit code 0, instead of waiting for the request"
    )
    func shutdownTimeoutBoundsTheStop() async throws {
        try await Self.withSignedInServe(["GATEHOUSE_SHUTDOWN_TIMEOUT": "2"]) { emulatorURL, instance, client, chain in
            // GitHub's /user now takes 20 s; a live profile request waits on it.
            try await Self.slowGitHubUser(emulatorURL: emulatorURL, client: client, milliseconds: 20000)
            let stuck = Task { try? await client.execute(Self.liveProfile(instance, chain)) }
            defer { stuck.cancel() }
            try await Self.waitForUserCalls(emulatorURL: emulatorURL, client: client)
            let signalled = ContinuousClock.now
            kill(instance.process.pid, SIGTERM)
            let status = try await Self.exit(of: instance.process, within: .seconds(15))
            let took = ContinuousClock.now - signalled
            #expect(status.map(SpawnedProcess.exitCode) == 0, "\(String(describing: status)) \(instance.logTail)")
            // Far below the 20 s the request would have kept it: 6.4 s was seen under the whole
            // suite's load, 6 s was too tight.
            #expect(took < .seconds(12), "\(took)")
        }
    }

    @Test(
        "SIGTERM during slow upstream calls: /readyz answers 503 at once while the listener still serves for GATEHOUSE_SHUTDOWN_DELAY (15 s here), then every call in flight completes with 200 and the process exits 0 — on SQLite and on PostgreSQL (whose pool, a service, stops after the listener)",
        arguments: [false, true]
    )
    func sigtermDrainsBeforeStopping(onPostgres: Bool) async throws {
        let database = onPostgres ? try await PostgresTestServer.freshDatabase() : nil
        try await Self.withSignedInServe(["GATEHOUSE_SHUTDOWN_DELAY": "15", "GATEHOUSE_SHUTDOWN_TIMEOUT": "30"], database: database) {
            emulatorURL, instance, client, chain in
            #expect(try await client.execute(OutboundRequest(url: "\(instance.url)/readyz")).status == 200)
            // GitHub's /user now takes 19 s: past the drain, so the calls are still in flight when
            // the listener stops accepting.
            try await Self.slowGitHubUser(emulatorURL: emulatorURL, client: client, milliseconds: 19000)
            let calls = (0..<4).map { _ in Task { try await client.execute(Self.liveProfile(instance, chain)) } }
            defer { for call in calls { call.cancel() } }
            try await Self.waitForUserCalls(emulatorURL: emulatorURL, client: client)

            // Probes on a client of their own, beside the four held transfers.
            let probe = CurlHTTPClient()
            defer { probe.shutdown() }
            kill(instance.process.pid, SIGTERM)
            let flipped = try await Self.readiness(of: [instance.url], is: 503, client: probe)
            // Well inside the 15 s drain, so that the listener still serves the check below: 1.6
            // and 3.5 s were seen under the whole suite's load, 7.4 s with two busy loops beside it.
            #expect(flipped < .seconds(11), "readiness flipped after \(flipped): \(instance.logTail)")
            // Still accepting and serving during the drain.
            do {
                #expect(try await probe.execute(OutboundRequest(url: "\(instance.url)/healthz")).status == 200)
            } catch {
                Issue.record("/healthz during the drain: \(error) \(instance.logTail)")
            }
            for call in calls {
                let answer = try await call.value
                #expect(answer.status == 200, "\(answer.status) \(answer.bodyText)")
            }
            let status = try await Self.exit(of: instance.process, within: .seconds(40))
            #expect(status.map(SpawnedProcess.exitCode) == 0, "\(String(describing: status)) \(instance.logTail)")
        }
    }

    @Test(
        "PostgreSQL: the pool runs as a service; the operations listener shows its connections in use and the operations waiting while requests are held behind a locked table, every held request then answers 200 and the gauges return to the idle pool"
    )
    func poolGauges() async throws {
        let database = try await PostgresTestServer.freshDatabase()
        try await withEmulatorAndFolder("gatehouse-pool") { emulatorURL, folder in
            // Two connections; nothing answered from memory, so every /v1/me reads the accounts table.
            let instance = try await ServeProcess.start(
                name: "pool", database: database, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                extra: ["GATEHOUSE_DATABASE_POOL_SIZE": "2", "GATEHOUSE_ACCOUNT_CACHE_TTL": "0", "GATEHOUSE_DATABASE_TIMEOUT": "30"])
            defer { instance.process.stop() }
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let chain = try await Self.signIn(client: client, gateway: instance.url)
            @Sendable func gauges() async throws -> [String: Double] {
                let text = try await client.execute(OutboundRequest(url: "\(instance.operationsURL)/metrics")).bodyText
                var values: [String: Double] = [:]
                for line in text.split(separator: "\n") where line.hasPrefix("gatehouse_database_pool_") {
                    let parts = line.split(separator: " ")
                    if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
                }
                return values
            }
            let idle = try await gauges()
            #expect(idle["gatehouse_database_pool_connections_max"] == 2, "\(idle)")
            #expect(idle["gatehouse_database_pool_operations_waiting"] == 0, "\(idle)")
            let me = OutboundRequest(url: "\(instance.url)/v1/me", headers: ["Authorization": "Bearer \(chain.idToken)"])
            let calls = try await PostgresTestServer.withTableLocked(database, table: "accounts") {
                let calls = (0..<5).map { _ in Task { try await client.execute(me) } }
                // Both connections taken (the change feed may hold one), the rest queued.
                var seen: [String: Double] = [:]
                for _ in 0..<200 {
                    seen = try await gauges()
                    if seen["gatehouse_database_pool_connections_in_use"] == 2, (seen["gatehouse_database_pool_operations_waiting"] ?? 0) >= 3 {
                        break
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(seen["gatehouse_database_pool_connections_in_use"] == 2, "\(seen)")
                #expect((seen["gatehouse_database_pool_operations_waiting"] ?? 0) >= 3, "\(seen)")
                return calls
            }
            for call in calls {
                let answer = try await call.value
                #expect(answer.status == 200, "\(answer.status) \(answer.bodyText)")
            }
            #expect(try await gauges()["gatehouse_database_pool_operations_waiting"] == 0)
        }
    }

    @Test(
        "SIGTERM while serve still waits for an unreachable PostgreSQL to migrate: the process ends within a few seconds instead of waiting out the shutdown timeout"
    )
    func sigtermDuringStartMigration() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-start-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let log = "\(folder)/serve.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let process = try SpawnedProcess.start(
            KeysCommandTests.executable.path, ["serve"],
            environment: [
                "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "GATEHOUSE_PORT": "0", "GATEHOUSE_OPS_ADDRESS": "127.0.0.1:0",
                "GATEHOUSE_PUBLIC_URL": ServeProcess.publicURL, "GATEHOUSE_DEVELOPMENT": "true",
                "GATEHOUSE_ENCRYPTION_KEY": TokenVault.generateKey().base64EncodedString(), "GATEHOUSE_GITHUB_CLIENT_ID": "x",
                "GATEHOUSE_GITHUB_CLIENT_SECRET": "y", "GATEHOUSE_DATABASE_URL": "postgres://gatehouse:x@127.0.0.1:1/none",
                "GATEHOUSE_DATABASE_TIMEOUT": "1", "GATEHOUSE_SHUTDOWN_DELAY": "30", "GATEHOUSE_SHUTDOWN_TIMEOUT": "60",
            ], output: .file(log))
        defer { process.stop() }
        // Still starting: nothing listens until the store is migrated.
        try await Task.sleep(for: .seconds(1))
        #expect(process.isRunning)
        let signalled = ContinuousClock.now
        kill(process.pid, SIGTERM)
        let status = try await Self.exit(of: process, within: .seconds(20))
        let took = ContinuousClock.now - signalled
        // Waiting out the drain alone would take 30 s: anything well below is the abandoned
        // start (measured ~1 s idle, 4.3 s once under the whole suite's load, hence not 4 s).
        #expect(status != nil, "still running 20 s after SIGTERM")
        #expect(took < .seconds(15), "\(took)")
    }

    /// A `gatehouse serve` (SQLite, or the PostgreSQL `database`; `extra` settings) beside an in-process emulator, with a
    /// client and a signed-in GitHub user's tokens; everything stopped afterwards.
    static func withSignedInServe(
        _ extra: [String: String], database: String? = nil, _ body: (_ emulatorURL: String, ServeProcess, CurlHTTPClient, Chain) async throws -> Void
    ) async throws {
        try await withEmulatorAndFolder("gatehouse-serve") { emulatorURL, folder in
            let instance = try await ServeProcess.start(
                name: "a", database: database, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder, extra: extra)
            defer { instance.process.stop() }
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            try await body(emulatorURL, instance, client, try await signIn(client: client, gateway: instance.url))
        }
    }

    /// The signed-in user's live GitHub profile on `instance`.
    static func liveProfile(_ instance: ServeProcess, _ chain: Chain) -> OutboundRequest {
        OutboundRequest(url: "\(instance.url)/v1/me/providers/github.com/profile", headers: ["Authorization": "Bearer \(chain.idToken)"])
    }

    /// Makes the emulator's GitHub `/user` answer after `milliseconds`.
    static func slowGitHubUser(emulatorURL: String, client: CurlHTTPClient, milliseconds: Int) async throws {
        let fault = try await client.execute(
            OutboundRequest(
                method: "POST", url: "\(emulatorURL)/_emulator/faults", headers: ["Content-Type": "application/json"],
                body: Array(#"{"endpoint": "GET /github-api/user", "delayMs": \#(milliseconds)}"#.utf8)))
        #expect(fault.status == 201)
    }

    /// Waits (at most 5 s) until live profile calls reached GitHub's `/user` (the sign-in made the first call).
    static func waitForUserCalls(emulatorURL: String, client: CurlHTTPClient) async throws {
        var inFlight = false
        for _ in 0..<800 where !inFlight {
            let stats = try jsonObject(try await client.execute(OutboundRequest(url: "\(emulatorURL)/_emulator/stats")))
            inFlight = (stats["GET /github-api/user"] as? Int ?? 0) >= 2
            if !inFlight { try await Task.sleep(for: .milliseconds(25)) }
        }
        try #require(inFlight, "the live profile requests never reached the provider")
    }

    /// `gatehouse_ready` and `gatehouse_storage_reachable` from a scrape of the instance's operations listener.
    static func readinessGauges(of instance: ServeProcess, client: CurlHTTPClient) async throws -> [String: Double] {
        let text = try await client.execute(OutboundRequest(url: "\(instance.operationsURL)/metrics")).bodyText
        var gauges: [String: Double] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, ["gatehouse_ready", "gatehouse_storage_reachable"].contains(String(parts[0])) {
                gauges[String(parts[0])] = Double(parts[1])
            }
        }
        return gauges
    }

    /// How long until every gateway's `/readyz` answers `status` (each polled every 50 ms, at
    /// most 20 s): the slowest gateway's time.
    static func readiness(of gateways: [String], is status: Int, client: CurlHTTPClient) async throws -> Duration {
        let started = ContinuousClock.now
        let times = try await withThrowingTaskGroup(of: Duration?.self) { group in
            for gateway in gateways {
                group.addTask {
                    for _ in 0..<400 {
                        let answer = try? await client.execute(OutboundRequest(url: "\(gateway)/readyz"))
                        if answer?.status == status { return ContinuousClock.now - started }
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    return nil
                }
            }
            return try await group.reduce(into: [Duration?]()) { $0.append($1) }
        }
        let holds = times.allSatisfy { $0 != nil }
        #expect(holds, "readiness never became \(status) on some gateway")
        return times.compactMap { $0 }.max() ?? .seconds(20)
    }

    /// The child's wait status once it exited, or `nil` if it still runs after `limit`.
    static func exit(of process: SpawnedProcess, within limit: Duration) async throws -> Int32? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if !process.isRunning { return await process.exited() }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// A whole GitHub sign-in on `gateway` (its public URL is the shared `ServeProcess.publicURL`,
    /// so the provider's redirect is sent on to `gateway`, as a load balancer would); the chain's first tokens.
    static func signIn(client: CurlHTTPClient, gateway: String) async throws -> Chain {
        let (_, json) = try await headlessSignIn(
            client: client, gateway: gateway, returnTo: TestDeployment.returnTo, publicURL: ServeProcess.publicURL)
        guard let refreshToken = json["refreshToken"] as? String, let idToken = json["idToken"] as? String else {
            throw FlowError("the result has no tokens")
        }
        return Chain(refreshToken: refreshToken, idToken: idToken)
    }

    /// `POST /v1/token`.
    /// A refresh retried (three times at most, a quarter second apart) while it answers `503`:
    /// a 503 committed nothing, so the same token is retried, as a client does. Under the whole
    /// suite's load an instance's first operation after the database came back can pass the
    /// 1 s operation timeout these instances run with.
    static func refreshRetryingUnavailable(client: CurlHTTPClient, gateway: String, _ token: String) async throws -> OutboundResponse {
        var answer = try await refresh(client: client, gateway: gateway, token)
        for _ in 0..<3 where answer.status == 503 {
            try await Task.sleep(for: .milliseconds(250))
            answer = try await refresh(client: client, gateway: gateway, token)
        }
        return answer
    }

    static func refresh(client: CurlHTTPClient, gateway: String, _ token: String) async throws -> OutboundResponse {
        try await client.execute(
            OutboundRequest(
                method: "POST", url: "\(gateway)/v1/token", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Array("grant_type=refresh_token&refresh_token=\(FormEncoding.escape(token))".utf8)))
    }
}

/// A stop signal the load's tasks read.
final class Flag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}
