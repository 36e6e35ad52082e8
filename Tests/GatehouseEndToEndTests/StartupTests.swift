import CurlClient
import Foundation
import GatehouseCore
import GatehouseServer
import GatehouseTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `gatehouse serve` as an operator starts and stops it: what it says at start, a wrong key
/// refused, the descriptor limit raised, `SIGHUP` drained.
@Suite("Starting and stopping serve")
struct StartupTests {
    /// The JSON lines of a log file.
    static func lines(_ path: String) -> [[String: Any]] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    @Test(
        "the start-up line names version, commit, store and providers; ports are JSON numbers; SIGHUP drains like SIGTERM and exits 0"
    )
    func startLineAndSighup() async throws {
        try await withEmulatorAndFolder("startup") { emulatorURL, folder in
            let instance = try await ServeProcess.start(
                name: "a", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder)
            defer { instance.process.stop() }
            let lines = Self.lines(instance.logPath)
            let foundStart = lines.first { $0["message"] as? String == "Gatehouse starting" }
            let start = try #require(foundStart, "\(instance.logTail)")
            #expect(start["version"] as? String == Gatehouse.version && (start["commit"] as? String)?.isEmpty == false)
            #expect(start["store"] as? String == "sqlite" && start["providers"] as? [String] == ["github.com"], "\(start)")
            let foundListening = lines.first { $0["message"] as? String == "Gatehouse listening" }
            let listening = try #require(foundListening)
            #expect(listening["http.port"] is Int && listening["listener.role"] as? String == "public", "\(listening)")
            let foundOperations = lines.first { $0["message"] as? String == "Gatehouse operations listening" }
            let operations = try #require(foundOperations)
            #expect(operations["ops.port"] is Int && operations["listener.role"] as? String == "operations", "\(operations)")

            kill(instance.process.pid, SIGHUP)
            let status = await instance.process.exited()
            #expect(SpawnedProcess.exitCode(status) == 0, "status \(status): \(instance.logTail)")
            let holds = Self.lines(instance.logPath).contains { ($0["message"] as? String)?.hasPrefix("shutting down") == true }
            #expect(holds, "\(instance.logTail)")
        }
    }

    @Test("serve with no provider configured starts and says at once that nobody can sign in")
    func noProviderIsWarned() async throws {
        try await withEmulatorAndFolder("startup") { emulatorURL, folder in
            let instance = try await ServeProcess.start(
                name: "a", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                without: ["GATEHOUSE_GITHUB_CLIENT_ID", "GATEHOUSE_GITHUB_CLIENT_SECRET"])
            defer { instance.process.stop() }
            let warning = Self.lines(instance.logPath).first {
                ($0["message"] as? String)?.hasPrefix("no identity provider is configured") == true
            }
            #expect(warning?["level"] as? String == "warning", "\(instance.logTail)")
        }
    }

    @Test("serve refuses to start when the encryption key does not open the stored data keys, saying so at error level")
    func wrongKeyIsRefused() async throws {
        try await withEmulatorAndFolder("startup") { emulatorURL, folder in
            let first = try await ServeProcess.start(
                name: "a", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder)
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            // A sign-in seals tokens: the store has a data key now.
            _ = try await DatabaseFailoverTests.signIn(client: client, gateway: first.url)
            first.process.stop(signal: SIGTERM)
            do {
                let second = try await ServeProcess.start(
                    name: "a", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder)
                second.process.stop()
                Issue.record("serve started with a key that opens nothing")
            } catch {
                let lines = Self.lines("\(folder)/a.log")
                let refusal = lines.first { $0["message"] as? String == "Gatehouse cannot start" }
                #expect(refusal?["level"] as? String == "error", "\(lines.suffix(5))")
                #expect((refusal?["reason"] as? String)?.contains("do not open the stored data keys") == true, "\(lines.suffix(5))")
            }
        }
    }

    @Test(
        "the soft descriptor limit is raised to the hard one and logged: under prlimit --nofile=96:8192, 150 held connections leave /readyz answering"
    )
    func descriptorLimitIsRaised() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit"), "prlimit (util-linux)")
        try await withEmulatorAndFolder("startup") { emulatorURL, folder in
            let instance = try await ServeProcess.start(
                name: "a", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                launcher: ["/usr/bin/prlimit", "--nofile=96:8192", "--"])
            defer { instance.process.stop() }
            let limits = try String(contentsOfFile: "/proc/\(instance.process.pid)/limits", encoding: .utf8)
            let foundLine = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }
            let line = try #require(foundLine)
            #expect(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).first == "8192", "\(line)")
            let logged = Self.lines(instance.logPath).first { $0["message"] as? String == "open-file limit" }
            #expect(logged?["fd.limit"] as? Int == 8192 && logged?["fd.hard_limit"] as? Int == 8192, "\(instance.logTail)")

            // 150 idle connections: more than the 96 the process was started with.
            let held = try Self.hold(150, to: instance.url)
            defer { for descriptor in held { close(descriptor) } }
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            var request = OutboundRequest(url: instance.operationsURL + "/readyz")
            request.timeout = .seconds(10)
            let ready = try await client.execute(request)
            #expect(ready.status == 200, "\(ready.status) \(ready.bodyText)")
            let answered = try await client.execute(OutboundRequest(url: instance.url + "/healthz"))
            #expect(answered.status == 200)
        }
    }

    /// `count` connections to `url`'s port on 127.0.0.1, held open (the caller closes them).
    static func hold(_ count: Int, to url: String) throws -> [Int32] {
        let foundPort = url.split(separator: ":").last.flatMap { Int($0) }
        let port = try #require(foundPort)
        return try (0..<count).map { _ in try LoopbackSocket.connect(port: port).descriptor }
    }

    @Test(
        "at its connection limit (prlimit --nofile=256+4 per processor, up to 250 held connections) the public listener stops accepting and keeps descriptors free: no accept fails, the limit is logged and counted, and the listener serves again once they close"
    )
    func connectionLimitKeepsDescriptors() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit"), "prlimit (util-linux)")
        // 256 descriptors beside the event loops' 4 each: a limit of 96 connections, whatever
        // the machine's processors.
        let descriptors = 256 + 4 * ConnectionLimit.processors
        try await withEmulatorAndFolder("startup") { emulatorURL, folder in
            let instance = try await ServeProcess.start(
                name: "a", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                extra: ["GATEHOUSE_UPSTREAM_CONNECTIONS": "1"], launcher: ["/usr/bin/prlimit", "--nofile=\(descriptors):\(descriptors)", "--"])
            defer { instance.process.stop() }
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            func metric(_ name: String, _ labels: [String: String] = ["listener": "public"]) async throws -> Double? {
                try await ResilienceTests.metric(at: instance.operationsURL, client: client, name, labels)
            }
            func logged(_ prefix: String) -> [[String: Any]] {
                Self.lines(instance.logPath).filter { ($0["message"] as? String)?.hasPrefix(prefix) == true }
            }
            #expect(try await client.execute(OutboundRequest(url: instance.operationsURL + "/readyz")).status == 200)
            #expect(try await client.execute(OutboundRequest(url: instance.url + "/healthz")).status == 200)
            // What the descriptor limit leaves after the process's own, the operations
            // listener's 64 and a quarter of the rest for provider calls; fewer than 256 is
            // warned of.
            let limit = try #require(try await metric("gatehouse_connections_limit"), "\(instance.logTail)")
            let started = Self.lines(instance.logPath).first { $0["connections.max"] != nil }
            #expect(started?["connections.max"] as? Int == Int(limit) && started?["connections.fitting"] as? Int == Int(limit), "\(instance.logTail)")
            #expect(started?["fd.limit"] as? Int == descriptors && started?["level"] as? String == "warning", "\(instance.logTail)")
            try #require(limit >= 16 && Int(limit) <= descriptors - 128, "\(limit) connections")
            // Calls out: half of the 32 descriptors kept for them (a quarter of the 128 left),
            // 4 of them for one user.
            #expect(try await metric("gatehouse_upstream_calls_limit", [:]) == 16)
            let calls = logged("upstream call limit").first
            #expect(calls?["upstream.calls"] as? Int == 16 && calls?["level"] as? String == "info", "\(instance.logTail)")
            #expect(calls?["upstream.calls.per_user"] as? Int == 4, "\(instance.logTail)")
            #expect(calls?["upstream.calls.reserved"] as? Int == 2, "\(instance.logTail)")
            #expect(calls?["upstream.calls.per_provider"] as? Int == 8, "\(instance.logTail)")

            // Past the limit, the rest wait in the listen backlog (at most 256, and the
            // kernel's somaxconn): a connect beyond it would wait for its SYN to be retried.
            var held = try Self.hold(min(250, Int(limit) + Self.listenBacklog - 16), to: instance.url)
            defer { for descriptor in held { close(descriptor) } }
            for _ in 0..<200 where logged("connection limit reached").isEmpty { try await Task.sleep(for: .milliseconds(50)) }
            let reached = try #require(logged("connection limit reached").first, "\(instance.logTail)")
            #expect(reached["level"] as? String == "warning" && reached["connections.max"] as? Int == Int(limit), "\(reached)")
            // Held for over a second, a tick of libdispatch's thread-pool monitor: the process
            // keeps the descriptors the limit leaves and goes on answering on the other listener.
            try await Task.sleep(for: .milliseconds(1200))
            #expect(instance.process.isRunning, "\(instance.logTail)")
            let open = try #require(try await metric("gatehouse_connections_open"))
            // One connection accepted a read: the count stops at the limit.
            #expect(open == limit, "\(open) open, limit \(limit)")
            let inUse = try #require(Self.openDescriptors(of: instance.process.pid))
            #expect(inUse < descriptors - 50, "\(inUse) of \(descriptors) descriptors open")
            #expect(try await metric("gatehouse_accept_failures_total") == 0)
            #expect(logged("cannot accept connections").isEmpty, "\(instance.logTail)")
            #expect(try await metric("gatehouse_connection_limit_reached_total") ?? 0 >= 1)

            // The connections that waited in the listen backlog are accepted as the held ones close.
            for descriptor in held { close(descriptor) }
            held = []
            var request = OutboundRequest(url: instance.url + "/healthz")
            request.timeout = .seconds(10)
            let answered = try? await client.execute(request)
            #expect(answered?.status == 200, "\(instance.logTail)")
            // The backlog's connections, their clients gone, are accepted and closed one by one
            // as the listener reaches them: the count settles once two readings 50 ms apart
            // both show at most the two this test keeps (10 s at most).
            var settled = false
            var last = Double.infinity
            for _ in 0..<200 where !settled {
                let now = try await metric("gatehouse_connections_open") ?? 0
                settled = now <= 2 && last <= 2
                last = now
                if !settled { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(settled, "gatehouse_connections_open: \(last)")
        }
    }

    /// How many connections wait in a Hummingbird listener's backlog at most: its 256, or the
    /// kernel's `net.core.somaxconn` when lower.
    static var listenBacklog: Int {
        let text = try? String(contentsOfFile: "/proc/sys/net/core/somaxconn", encoding: .utf8)
        return min(256, text.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 128)
    }

    /// How many descriptors process `pid` holds open.
    static func openDescriptors(of pid: Int32) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    @Test(
        "accept out of descriptors (prlimit --nofile=64:64, GATEHOUSE_MAX_CONNECTIONS=1000, 100 held connections): the limit above what fits is warned of, the failures logged with the limit at most every 10 s, the process outlives 3 s out of descriptors (but the one the listener gives back) while the held connections ask and are answered, and the listener serves again once they close"
    )
    func acceptWithoutDescriptors() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit"), "prlimit (util-linux)")
        try await withEmulatorAndFolder("startup") { emulatorURL, folder in
            let instance = try await ServeProcess.start(
                name: "a", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                extra: ["GATEHOUSE_MAX_CONNECTIONS": "1000"], launcher: ["/usr/bin/prlimit", "--nofile=64:64", "--"])
            defer { instance.process.stop() }
            let warned = Self.lines(instance.logPath).first { ($0["message"] as? String)?.hasPrefix("GATEHOUSE_MAX_CONNECTIONS is above") == true }
            #expect(warned?["level"] as? String == "warning" && warned?["connections.max"] as? Int == 1000, "\(instance.logTail)")
            func refusal() -> [String: Any]? {
                Self.lines(instance.logPath).first { ($0["message"] as? String)?.hasPrefix("cannot accept connections") == true }
            }
            // Warmed first: the readiness check opens the store's read connection, so the
            // only descriptors the held connections take away are the listener's.
            let warm = CurlHTTPClient()
            defer { warm.shutdown() }
            #expect(try await warm.execute(OutboundRequest(url: instance.operationsURL + "/readyz")).status == 200)
            #expect(try await warm.execute(OutboundRequest(url: instance.url + "/healthz")).status == 200)
            var held = try Self.hold(100, to: instance.url)
            defer { for descriptor in held { close(descriptor) } }
            let exhausted = ContinuousClock.now
            for _ in 0..<2000 where refusal() == nil { try await Task.sleep(for: .milliseconds(5)) }
            // Out of descriptors for 3 s, across ticks of the Swift runtime's thread-pool monitor
            // (libdispatch), which opens /proc/<tid>/stat once a second while work waits and
            // stops the process (SIGILL) when that fails. The held connections the listener
            // took ask for /healthz all along, so that work waits at some of those ticks; the
            // descriptor the listener gives back is what the monitor finds.
            let asked = Array("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n".utf8)
            var answers = [UInt8](repeating: 0, count: 65536)
            var served = 0
            let asking = ContinuousClock.now
            // 3 s at least; on a loaded machine, until the first answer (15 s at most).
            func asks() -> Bool {
                let elapsed = ContinuousClock.now - asking
                return elapsed < .seconds(3) || (served == 0 && elapsed < .seconds(15))
            }
            while asks() && instance.process.isRunning {
                for descriptor in held.prefix(30) { _ = send(descriptor, asked, asked.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                for descriptor in held.prefix(30) {
                    let read = recv(descriptor, &answers, answers.count, Int32(MSG_DONTWAIT))
                    if read > 0 && String(decoding: answers[..<read], as: UTF8.self).hasPrefix("HTTP/1.1 200") { served += 1 }
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(instance.process.isRunning, "\(instance.logTail)")
            // The connections it holds were served meanwhile.
            #expect(served > 0, "descriptors open: \(Self.openDescriptors(of: instance.process.pid) ?? -1); \(instance.logTail)")
            for descriptor in held { close(descriptor) }
            held = []
            let pauses = Int((ContinuousClock.now - exhausted) / .milliseconds(50))
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            var request = OutboundRequest(url: instance.url + "/healthz")
            request.timeout = .seconds(10)
            let answered = try? await client.execute(request)
            #expect(answered?.status == 200, "\(instance.logTail)")
            let logged = try #require(refusal(), "\(instance.logTail)")
            #expect(logged["level"] as? String == "error")
            #expect(logged["listener.role"] as? String == "public" && logged["fd.limit"] as? Int == 64, "\(logged)")
            // Accept is retried every 50 ms while descriptors lack; the line comes at most every 10 s.
            let repeated = Self.lines(instance.logPath).filter { ($0["message"] as? String)?.hasPrefix("cannot accept connections") == true }
            #expect(repeated.count <= 2, "\(repeated.count) lines")
            // Each failed accept is counted: at most about one per pause.
            let metrics = try await client.execute(OutboundRequest(url: instance.operationsURL + "/metrics")).bodyText
            let failures = metrics.split(separator: "\n").first { $0.hasPrefix(#"gatehouse_accept_failures_total{listener="public"} "#) }
                .flatMap { Double($0.split(separator: " ").last ?? "") }
            let counted = try #require(failures, "\(metrics)")
            #expect(counted >= 1 && counted <= Double(2 * pauses + 10), "\(counted) failed accepts in \(pauses) pauses")
        }
    }

    @Test("the documented serve + gatehouse-emulator settings (Deploy/emulator.env) configure all four providers: check --offline finds each")
    func emulatorSettingsFile() async throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Deploy/emulator.env")
        let text = try String(contentsOf: file, encoding: .utf8)
        try await withEmulatorAndFolder("startup") { emulatorURL, folder in
            var settings: [String: String] = [:]
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                guard let equals = line.firstIndex(of: "=") else { continue }
                // The file's emulator is on port 8081; this test's on the port it bound.
                settings[String(line[..<equals])] = line[line.index(after: equals)...].replacingOccurrences(
                    of: "http://127.0.0.1:8081", with: emulatorURL)
            }
            settings["GATEHOUSE_ENCRYPTION_KEY"] = TokenVault.generateKey().base64EncodedString()
            settings["GATEHOUSE_DATA_DIR"] = folder
            let checked = try await KeysCommandTests.run(["check", "--offline"], environment: settings, removing: ["GATEHOUSE_DATABASE_URL"])
            #expect(checked.status == 0, "\(checked.output)")
            for line in [
                "provider github.com: configured", "provider microsoft.com: discovery ok", "provider yahoo.com: discovery ok",
                "provider oidc.emulator: discovery ok",
            ] {
                #expect(checked.output.contains(line), "\(line): \(checked.output)")
            }
        }
    }

    /// A loopback port nothing listens on (bound, read, closed).
    static func closedPort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        try #require(bound)
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test(
        "an unreachable PostgreSQL: migrate and check --offline fail within the database timeout naming host and port, never the password; serve says so at error level while it waits, and stops on SIGTERM"
    )
    func unreachableDatabase() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
        let port = try Self.closedPort()
        let url = "postgres://gatehouse:not-the-password-\(port)@127.0.0.1:\(port)/gatehouse"
        let settings = [
            "GATEHOUSE_DATABASE_URL": url, "GATEHOUSE_DATABASE_TIMEOUT": "2", "GATEHOUSE_PUBLIC_URL": ServeProcess.publicURL,
            "GATEHOUSE_DEVELOPMENT": "true", "GATEHOUSE_ENCRYPTION_KEY": TokenVault.generateKey().base64EncodedString(),
            "GATEHOUSE_GITHUB_CLIENT_ID": "x", "GATEHOUSE_GITHUB_CLIENT_SECRET": "y", "GATEHOUSE_RETURN_TO_ALLOWLIST": TestDeployment.returnTo,
        ]
        for command in [["migrate"], ["check", "--offline"]] {
            let started = ContinuousClock.now
            let result = try await KeysCommandTests.run(command, environment: settings)
            #expect(result.status != 0, "\(command): \(result.output)")
            // About the 2 s timeout unloaded; 20 s has been seen under the whole suite's load.
            // Waiting for ever, as serve does, would outlast any bound.
            #expect(ContinuousClock.now - started < .seconds(60), "\(command) took \(ContinuousClock.now - started)")
            #expect(result.output.contains("cannot reach the PostgreSQL database at 127.0.0.1:\(port)"), "\(command): \(result.output)")
            #expect(!result.output.contains("not-the-password"), "\(command)")
        }
        try await withScratchFolder("startup") { folder in
            let log = folder + "/serve.log"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            var environment = ProcessInfo.processInfo.environment.merging(settings) { $1 }
            environment["GATEHOUSE_PORT"] = "0"
            environment["GATEHOUSE_OPS_ADDRESS"] = "127.0.0.1:0"
            environment["GATEHOUSE_SHUTDOWN_DELAY"] = "0"
            let serve = try SpawnedProcess.start(KeysCommandTests.executable.path, ["serve"], environment: environment, output: .file(log))
            defer { serve.stop() }
            var waiting: [String: Any]?
            for _ in 0..<200 where waiting == nil && serve.isRunning {
                waiting = Self.lines(log).first { $0["message"] as? String == "waiting for the database" }
                if waiting == nil { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(waiting?["level"] as? String == "error", "\(Self.lines(log).suffix(4))")
            #expect((waiting?["reason"] as? String)?.contains("127.0.0.1:\(port)") == true)
            #expect(serve.isRunning, "serve waits for the database")
            // The operations listener is open meanwhile: alive, not ready, and why; metrics.
            let foundOperationsPort = Self.lines(log).first { $0["message"] as? String == "Gatehouse operations listening" }?["ops.port"] as? Int
            let operationsPort = try #require(
                foundOperationsPort,
                "the operations listener opens before the database is reached")
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let operations = "http://127.0.0.1:\(operationsPort)"
            #expect(try await client.execute(OutboundRequest(url: "\(operations)/healthz")).status == 200)
            let ready = try await client.execute(OutboundRequest(url: "\(operations)/readyz"))
            #expect(ready.status == 503)
            #expect(ready.bodyText.contains("waiting for the database") && ready.bodyText.contains("127.0.0.1:\(port)"), "\(ready.bodyText)")
            #expect(!ready.bodyText.contains("not-the-password"))
            #expect(try await client.execute(OutboundRequest(url: "\(operations)/metrics")).bodyText.contains("gatehouse_build_info"))
            let holds = !Self.lines(log).contains { $0["message"] as? String == "Gatehouse listening" }
            #expect(holds, "the public listener waits")
            kill(serve.pid, SIGTERM)
            let status = await serve.exited()
            #expect(SpawnedProcess.exitCode(status) == 0, "status \(status)")
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            #expect(!text.contains("not-the-password"))
        }
    }

    @Test(
        "a PostgreSQL server that refuses the connection (an unknown role, a missing database, no TLS for sslmode=require): migrate and check --offline say what the server said, not that it cannot be reached"
    )
    func refusedDatabaseConnection() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
        let foundBase = PostgresTestServer.baseURL.flatMap { URLComponents(string: $0) }
        let base = try #require(foundBase, "run the suite with scripts/test or scripts/postgres swift test")
        let role = "nobody_\(UInt32.random(in: 0...UInt32.max))"
        var unknownRole = base
        unknownRole.user = role
        unknownRole.password = "not-the-password"
        var missingDatabase = base
        missingDatabase.path = "/missing_\(UInt32.random(in: 0...UInt32.max))"
        var tlsRequired = base
        tlsRequired.queryItems = [URLQueryItem(name: "sslmode", value: "require")]
        let server = "the PostgreSQL server at 127.0.0.1:\(base.port ?? 0)"
        let cases = [
            (try #require(unknownRole.string), "\(server)/postgres refused the connection: SQLSTATE 28000: role \"\(role)\" does not exist"),
            (
                try #require(missingDatabase.string),
                "\(server)\(missingDatabase.path) refused the connection: SQLSTATE 3D000: database \"\(missingDatabase.path.dropFirst())\" does not exist"
            ),
            (try #require(tlsRequired.string), "\(server)/postgres does not offer TLS, which the URL's sslmode requires"),
        ]
        for (url, said) in cases {
            let settings = [
                "GATEHOUSE_DATABASE_URL": url, "GATEHOUSE_DATABASE_TIMEOUT": "10", "GATEHOUSE_PUBLIC_URL": ServeProcess.publicURL,
                "GATEHOUSE_DEVELOPMENT": "true", "GATEHOUSE_ENCRYPTION_KEY": TokenVault.generateKey().base64EncodedString(),
                "GATEHOUSE_GITHUB_CLIENT_ID": "x", "GATEHOUSE_GITHUB_CLIENT_SECRET": "y", "GATEHOUSE_RETURN_TO_ALLOWLIST": TestDeployment.returnTo,
            ]
            for command in [["migrate"], ["check", "--offline"]] {
                let result = try await KeysCommandTests.run(command, environment: settings)
                #expect(result.status != 0, "\(command): \(result.output)")
                #expect(result.output.contains(said), "\(command): \(result.output)")
                #expect(!result.output.contains("cannot reach"), "\(command): \(result.output)")
                #expect(!result.output.contains("not-the-password"), "\(command)")
            }
        }
    }

    @Test(
        "a configuration error prints one line naming the setting and exits 64 from every command: a malformed setting and a value validation refuses, from serve, demo, check --offline and migrate"
    )
    func configurationErrorsAreUniform() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
        try await withScratchFolder("startup") { folder in
            let base = [
                "GATEHOUSE_DATA_DIR": folder, "GATEHOUSE_PUBLIC_URL": ServeProcess.publicURL, "GATEHOUSE_DEVELOPMENT": "true",
                "GATEHOUSE_GITHUB_CLIENT_ID": "a", "GATEHOUSE_GITHUB_CLIENT_SECRET": "b", "GATEHOUSE_RETURN_TO_ALLOWLIST": TestDeployment.returnTo,
                "GATEHOUSE_ENCRYPTION_KEY": TokenVault.generateKey().base64EncodedString(), "GATEHOUSE_PORT": "0", "GATEHOUSE_OPS_ADDRESS": "off",
            ]
            let cases: [(settings: [String: String], commands: [[String]], names: String)] = [
                (
                    ["GATEHOUSE_LOG_LEVEL": "loud"],
                    [["serve"], ["demo", "--port", "0", "--emulator-port", "0"], ["check", "--offline"], ["migrate"]], "GATEHOUSE_LOG_LEVEL"
                ),
                (["GATEHOUSE_RETURN_TO_ALLOWLIST": "ftp://x"], [["serve"], ["check", "--offline"]], "return_to allow-list entry"),
                // Numbers whose milliseconds no duration holds: refused, not a trap.
                (["GATEHOUSE_UPSTREAM_TIMEOUT": "1e300"], [["serve"], ["check", "--offline"]], "GATEHOUSE_UPSTREAM_TIMEOUT"),
                (["GATEHOUSE_DATABASE_TIMEOUT": "1e300"], [["serve"], ["migrate"]], "GATEHOUSE_DATABASE_TIMEOUT"),
                (["GATEHOUSE_UPSTREAM_TIMEOUTS": "github.com=1e300"], [["serve"]], "GATEHOUSE_UPSTREAM_TIMEOUTS"),
                // The console signs operators in with return_to <public URL>/admin/: an allow-list
                // without it would answer each of its sign-in links 400 invalid-return-to.
                (
                    ["GATEHOUSE_ADMIN_CONSOLE": "true", "GATEHOUSE_ADMINS": "ops@example.com"], [["serve"], ["check", "--offline"]],
                    "GATEHOUSE_RETURN_TO_ALLOWLIST"
                ),
                // An allow-list of domains would match no token's tid, and so restrict nothing.
                (
                    [
                        "GATEHOUSE_MICROSOFT_CLIENT_ID": "c", "GATEHOUSE_MICROSOFT_CLIENT_SECRET": "d",
                        "GATEHOUSE_MICROSOFT_ALLOWED_TENANTS": "contoso.com",
                    ],
                    [["serve"], ["check", "--offline"]], "GATEHOUSE_MICROSOFT_ALLOWED_TENANTS"
                ),
            ]
            for (settings, commands, names) in cases {
                for command in commands {
                    let result = try await KeysCommandTests.run(
                        command, environment: base.merging(settings) { $1 }, removing: ["GATEHOUSE_DATABASE_URL"])
                    let lines = result.output.split(separator: "\n").filter { !$0.hasPrefix("{") }
                    #expect(result.status == 64, "\(command): \(result.output)")
                    #expect(
                        lines.count == 1 && lines.first?.hasPrefix("Error: ") == true && lines.first?.contains(names) == true, "\(command): \(lines)")
                }
            }
        }
    }
}
