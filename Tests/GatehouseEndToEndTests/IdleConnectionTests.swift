import Dispatch
import Foundation
import GatehouseCore
import GatehouseTestSupport
import Glibc
import Testing

/// Clients that stop talking or slow to a trickle: both listeners close a connection when no
/// whole request head, body part or end has come for `GATEHOUSE_IDLE_TIMEOUT` and no answer is
/// under way, a request whose body arrives slower than 500 bytes a second after that timeout,
/// and a connection whose client has not read its answer for the timeout; so such clients
/// cannot hold descriptors and memory for ever. A slow answer and a steady upload are not cut.
@Suite("Idle and slow connections")
struct IdleConnectionTests {
    @Test(
        "closed once the idle timeout passes, on both listeners and none early: a keep-alive connection idle after its answer, one that never sends a byte, one whose request head stops halfway, a head and a body sent a byte at a time (a body the route reads logged as the client's 408)"
    )
    func idleConnectionsClose() async throws {
        try await withDeployment(idleTimeout: .seconds(1)) { deployment in
            let ports = [
                try #require(URLComponents(string: deployment.gatewayURL)?.port),
                try #require(URLComponents(string: deployment.operationsURL)?.port),
            ]
            let interval: Duration = .milliseconds(200)
            for port in ports {
                // Each on a thread of its own, so that each close is timed when it happens.
                // Each timed from before its connection exists: the server's timer starts later,
                // so a close sooner than the timeout after it is early however late this thread
                // runs.
                async let answered = LoopbackSocket.offPool {
                    let since = ContinuousClock.now
                    let socket = try LoopbackSocket.connect(port: port)
                    defer { socket.close() }
                    try socket.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n")
                    let answer = try socket.read(until: #""status""#)
                    let closing = try socket.readUntilClosed()
                    return (answer, closing.rest.count, closing.at - since)
                }
                async let silent = LoopbackSocket.offPool {
                    let since = ContinuousClock.now
                    let socket = try LoopbackSocket.connect(port: port)
                    defer { socket.close() }
                    let closing = try socket.readUntilClosed()
                    return (closing.rest.count, closing.at - since)
                }
                async let halfway = LoopbackSocket.offPool {
                    let since = ContinuousClock.now
                    let socket = try LoopbackSocket.connect(port: port)
                    defer { socket.close() }
                    try socket.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nAccept: ")
                    let closing = try socket.readUntilClosed()
                    return (closing.rest.count, closing.at - since)
                }
                async let trickledHead = LoopbackSocket.offPool {
                    let socket = try LoopbackSocket.connect(port: port)
                    defer { socket.close() }
                    let since = ContinuousClock.now
                    return try socket.trickle(after: "GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nX-Padding: ", every: interval) - since
                }
                // Answered at once (405), then drained: a byte per 200 ms would restart the idle
                // timer for ever; the body's rate closes it.
                async let trickledBody = LoopbackSocket.offPool {
                    let socket = try LoopbackSocket.connect(port: port)
                    defer { socket.close() }
                    let since = ContinuousClock.now
                    return try socket.trickle(
                        after: "POST /healthz HTTP/1.1\r\nHost: gatehouse\r\nContent-Length: 100000\r\n\r\n", every: interval) - since
                }
                let (answer, rest, idle) = try await answered
                #expect(answer.hasPrefix("HTTP/1.1 200"), "port \(port): \(answer)")
                #expect(rest == 0, "port \(port): \(rest) bytes after the answer")
                #expect(idle >= .milliseconds(900), "port \(port): closed \(idle) after the connection was opened")
                for (name, (rest, after)) in [("silent", try await silent), ("halfway", try await halfway)] {
                    #expect(rest == 0, "\(name) on port \(port) received \(rest) bytes")
                    #expect(after >= .milliseconds(500), "\(name) on port \(port) was closed after \(after)")
                }
                for (name, after) in [("head", try await trickledHead), ("body", try await trickledBody)] {
                    #expect(after >= .milliseconds(500), "a trickled \(name) on port \(port) was closed after \(after)")
                }
            }

            // A body that trickles into a route that reads it: closed the same way, and logged
            // as the client's failure (408), not as the gateway's.
            let form = "POST /v1/token HTTP/1.1\r\nHost: gatehouse\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 8000\r\n\r\n"
            let closedAfter = try await LoopbackSocket.offPool {
                let socket = try LoopbackSocket.connect(port: ports[0])
                defer { socket.close() }
                let since = ContinuousClock.now
                return try socket.trickle(after: form + "grant_type=refresh_token&refresh_token=", every: interval) - since
            }
            #expect(closedAfter >= .milliseconds(500), "closed after \(closedAfter)")
            func tokenLine() -> [String: Any]? {
                deployment.logs.lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                    .first { $0["message"] as? String == "request" && $0["http.path"] as? String == "/v1/token" }
            }
            for _ in 0..<100 where tokenLine() == nil { try await Task.sleep(for: .milliseconds(100)) }
            #expect(tokenLine()?["http.status"] as? Int == 408, "\(tokenLine() ?? [:])")
            let holds = !deployment.logs.lines.contains { $0.contains(#""request failed""#) }
            #expect(holds)
        }
    }

    @Test(
        "with a 3 s idle timeout: an answer that waits 4 s for its provider and an upload sent steadily for 4 s complete; an answer its client stops reading is cut off; a connection that asked for an upgrade closes after its answer"
    )
    func slowButLiveConnections() async throws {
        let passthrough: @Sendable (inout GatewayConfiguration) -> Void = { configuration in
            let emulatorURL = String(configuration.github!.apiBaseURL.dropLast("/github-api".count))
            configuration.api = APIPolicy.sample(yahooBaseURL: "\(emulatorURL)/yahoo-fantasy")
        }
        // 3 s rather than 1: the steady upload's 100 ms pauses must not meet it on a loaded machine.
        try await withDeployment(gateway: passthrough, idleTimeout: .seconds(3)) { deployment in
            let (_, idToken, _) = try await GatewayTokenTests.signedIn(deployment)
            let port = try #require(URLComponents(string: deployment.gatewayURL)?.port)
            // On sockets of their own: an HTTP client would retry a request whose connection closed.
            _ = try await deployment.control("faults", #"{"endpoint": "GET /github-api/user", "delayMs": 4000, "times": 1}"#)
            let (head, waited) = try await LoopbackSocket.offPool {
                let caller = try LoopbackSocket.connect(port: port)
                defer { caller.close() }
                let started = ContinuousClock.now
                try caller.send(
                    "GET /v1/me/providers/github.com/profile HTTP/1.1\r\nHost: gatehouse\r\nAuthorization: Bearer \(idToken)\r\n\r\n")
                return (try caller.read(until: "\r\n\r\n"), ContinuousClock.now - started)
            }
            #expect(head.hasPrefix("HTTP/1.1 200"), "\(head)")
            #expect(waited >= .milliseconds(4000), "the profile answered after \(waited): the fault did not delay it")

            // 6,000 bytes in 40 pieces 100 ms apart: 4 s, at 1,500 bytes a second. The route
            // reads the whole form before it answers (400: no such refresh token).
            let (upload, took) = try await LoopbackSocket.offPool {
                let caller = try LoopbackSocket.connect(port: port)
                defer { caller.close() }
                let form = "grant_type=refresh_token&refresh_token=" + String(repeating: "a", count: 6000 - 39)
                let started = ContinuousClock.now
                try caller.send(
                    "POST /v1/token HTTP/1.1\r\nHost: gatehouse\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: \(form.utf8.count)\r\n\r\n"
                )
                let bytes = Array(form.utf8)
                for start in stride(from: 0, to: bytes.count, by: 150) {
                    try caller.send(String(decoding: bytes[start..<min(start + 150, bytes.count)], as: UTF8.self))
                    usleep(100_000)
                }
                return (try caller.read(until: "\r\n\r\n"), ContinuousClock.now - started)
            }
            #expect(upload.hasPrefix("HTTP/1.1 400"), "\(upload)")
            #expect(took >= .milliseconds(3900), "the upload took \(took)")

            // NIO's decoder parses nothing after an upgrade request and keeps what follows:
            // the connection closes once the answer is out, not a timeout later.
            let (upgraded, closedAfter) = try await LoopbackSocket.offPool {
                let caller = try LoopbackSocket.connect(port: port)
                defer { caller.close() }
                try caller.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
                let answer = try caller.read(until: #""status""#)
                let answered = ContinuousClock.now
                return (answer, try caller.readUntilClosed().at - answered)
            }
            #expect(upgraded.hasPrefix("HTTP/1.1 200"), "\(upgraded)")
            #expect(closedAfter < .milliseconds(2500), "closed \(closedAfter) after the answer")

            // 8 MB that the caller stops reading after the head: once the socket's buffers are
            // full the channel stays unwritable, and a timeout later the gateway closes it, long
            // before the provider call's own 25 s. Watched from the kernel's table, since the
            // close reaches the caller only behind the bytes it has not read.
            let sendBuffer = try String(contentsOfFile: "/proc/sys/net/ipv4/tcp_wmem", encoding: .utf8).split(separator: "\t").last
            let holds = (sendBuffer.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? .max) < 6 << 20
            try #require(
                holds,
                "the kernel's send buffers could hold the whole answer")
            _ = try await deployment.control(
                "faults", #"{"endpoint": "GET /github-api/user/repos", "status": 200, "bodyBytes": 8000000, "times": 1}"#)
            let (caller, answered) = try await LoopbackSocket.offPool {
                let caller = try LoopbackSocket.connect(port: port, receiveBuffer: 4096)
                do {
                    try caller.send(
                        "GET /v1/me/providers/github.com/api/user/repos HTTP/1.1\r\nHost: gatehouse\r\nAuthorization: Bearer \(idToken)\r\n\r\n"
                    )
                    return (caller, try caller.read(until: "\r\n\r\n"))
                } catch {
                    caller.close()
                    throw error
                }
            }
            defer { caller.close() }
            #expect(answered.hasPrefix("HTTP/1.1 200"), "\(answered.prefix(300))")
            let waiting = ContinuousClock.now
            var state = try caller.peerState()
            while state == "01", ContinuousClock.now - waiting < .seconds(30) {
                try await Task.sleep(for: .milliseconds(100))
                state = try caller.peerState()
            }
            #expect(state != nil, "/proc/net/tcp lists no server end of the connection")
            #expect(state != "01", "the gateway kept for 30 s a connection whose client stopped reading")
            let rest = try await LoopbackSocket.offPool { try caller.readUntilClosed().rest.count }
            #expect(answered.utf8.count + rest < 8_000_000, "the whole answer arrived")
        }
    }

    /// The lines of `text` that start with `prefix`. A function of its own: written as a closure
    /// inside `serveSetting`, the first such filter answered no line of a scrape that held six
    /// (an identical filter right after it, six), in debug builds of the test process only.
    static func lines(of text: String, startingWith prefix: String) -> [Substring] {
        text.split(separator: "\n").filter { $0.hasPrefix(prefix) }
    }

    @Test("gatehouse serve reads GATEHOUSE_IDLE_TIMEOUT for both listeners, warns of uploads that may outlast it and counts the connections it cuts")
    func serveSetting() async throws {
        try await withEmulatorAndFolder("idle") { emulatorURL, folder in
            let gateway = try await ServeProcess.start(
                name: "idle", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                extra: [
                    "GATEHOUSE_IDLE_TIMEOUT": "1",
                    // Uploads to GitHub's API may take the upstream timeout (25 s), past the idle
                    // timeout; its issues take a page size but could not follow their pages.
                    "GATEHOUSE_API_POLICY": #"""
                    {"github.com": {"allow": ["GET /user/repos", "POST /user/repos",
                      {"route": "GET /user/issues", "query": ["per_page", "state"]},
                      {"route": "GET /user/orgs", "query": ["per_page", "page"]}]}}
                    """#,
                ])
            defer { gateway.process.stop() }
            let log = try String(contentsOfFile: gateway.logPath, encoding: .utf8)
            let gaps = log.split(separator: "\n").filter { $0.contains("a passthrough template takes a page size") }
            #expect(gaps.count == 1, "\(log)")
            let namesTheGap = gaps.allSatisfy { $0.contains(#""route":"GET /user/issues""#) && $0.contains(#""missing":"page""#) }
            #expect(namesTheGap)
            let warnings = log.split(separator: "\n").filter { $0.contains("uploads to a provider's API may take") }
            #expect(warnings.count == 1, "\(log)")
            let holds = warnings.allSatisfy {
                $0.contains(#""provider":"github.com""#) && $0.contains(#""upstream.timeout_s":"25""#) && $0.contains(#""idle_timeout_s":"1""#)
            }
            #expect(holds)
            for url in [gateway.url, gateway.operationsURL] {
                let port = try #require(URLComponents(string: url)?.port)
                let closing = try await LoopbackSocket.offPool {
                    let silent = try LoopbackSocket.connect(port: port)
                    defer { silent.close() }
                    return try silent.readUntilClosed()
                }
                #expect(closing.rest.isEmpty, "\(url)\n\(gateway.logTail)")
            }
            // Cut connections are counted by listener and reason: a trickled body on the
            // public listener, an upgrade request on the operations listener. The silent
            // connections above, closed at the idle timeout, are not.
            let publicPort = try #require(URLComponents(string: gateway.url)?.port)
            let operationsPort = try #require(URLComponents(string: gateway.operationsURL)?.port)
            let metrics = try await LoopbackSocket.offPool {
                let trickled = try LoopbackSocket.connect(port: publicPort)
                defer { trickled.close() }
                _ = try trickled.trickle(
                    after: "POST /healthz HTTP/1.1\r\nHost: gatehouse\r\nContent-Length: 100000\r\n\r\n", every: .milliseconds(200))
                let upgrade = try LoopbackSocket.connect(port: operationsPort)
                defer { upgrade.close() }
                try upgrade.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
                _ = try upgrade.readUntilClosed()
                let scrape = try LoopbackSocket.connect(port: operationsPort)
                defer { scrape.close() }
                try scrape.send("GET /metrics HTTP/1.1\r\nHost: gatehouse\r\nConnection: close\r\n\r\n")
                return String(decoding: try scrape.readUntilClosed().rest, as: UTF8.self)
            }
            // Every series exists from the start at 0; the two cut connections moved two.
            let series = Self.lines(of: metrics, startingWith: "gatehouse_connections_cut_total{")
            #expect(series.count == 6, "\(metrics)")
            let cuts = series.map(String.init).filter { $0.split(separator: " ").last != "0" }.sorted()
            #expect(
                cuts == [
                    #"gatehouse_connections_cut_total{listener="operations",reason="upgrade"} 1"#,
                    #"gatehouse_connections_cut_total{listener="public",reason="slow-body"} 1"#,
                ], "\(metrics)")
        }
    }

    @Test("gatehouse demo reads GATEHOUSE_IDLE_TIMEOUT, and warns of the sample policy's uploads that may outlast it")
    func demoSetting() async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["GATEHOUSE_IDLE_TIMEOUT"] = "1"
        try await DemoProcess.with(executable: KeysCommandTests.executable.path, environment: environment) { demo in
            let port = try #require(URLComponents(string: demo.url)?.port)
            let closing = try await LoopbackSocket.offPool {
                let silent = try LoopbackSocket.connect(port: port)
                defer { silent.close() }
                return try silent.readUntilClosed()
            }
            #expect(closing.rest.isEmpty)
            // The sample policy lets signed-in users upload to GitHub (POST) and Graph (PUT),
            // each within the default upstream timeout of 10 s. The demo assembles its
            // configuration once it listens: the warnings are awaited (20 s at most).
            var providers: [String] = []
            for _ in 0..<400 where providers.count < 2 {
                let output = (try? String(contentsOfFile: demo.folder + ".out", encoding: .utf8)) ?? ""
                providers = output.split(separator: "\n").filter {
                    $0.contains("uploads to a provider's API may take") && $0.contains(#""upstream.timeout_s":"10""#)
                }
                .compactMap { $0.firstMatch(of: #/"provider":"([^"]+)"/#).map { String($0.1) } }
                if providers.count < 2 { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(providers.sorted() == ["github.com", "microsoft.com"])
        }
    }
}
