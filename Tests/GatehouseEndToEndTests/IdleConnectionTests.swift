import Dispatch
import Foundation
import GatehouseCore
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
        "closed once the idle timeout passes, on both listeners and none before half of it: a keep-alive connection idle after its answer, one that never sends a byte, one whose request head stops halfway, a head and a body sent a byte at a time"
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
                async let answered = LoopbackSocket.offPool {
                    let socket = try LoopbackSocket.connect(port: port)
                    defer { socket.close() }
                    try socket.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n")
                    let answer = try socket.read(until: #""status""#)
                    let since = ContinuousClock.now
                    let closing = try socket.readUntilClosed()
                    return (answer, closing.rest.count, closing.at - since)
                }
                async let silent = LoopbackSocket.offPool {
                    let socket = try LoopbackSocket.connect(port: port)
                    defer { socket.close() }
                    let since = ContinuousClock.now
                    let closing = try socket.readUntilClosed()
                    return (closing.rest.count, closing.at - since)
                }
                async let halfway = LoopbackSocket.offPool {
                    let socket = try LoopbackSocket.connect(port: port)
                    defer { socket.close() }
                    let since = ContinuousClock.now
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
                // The server's timer starts when the answer is queued, before the client reads it.
                #expect(idle >= .milliseconds(250), "port \(port): closed \(idle) after the answer")
                for (name, (rest, after)) in [("silent", try await silent), ("halfway", try await halfway)] {
                    #expect(rest == 0, "\(name) on port \(port) received \(rest) bytes")
                    #expect(after >= .milliseconds(500), "\(name) on port \(port) was closed after \(after)")
                }
                for (name, after) in [("head", try await trickledHead), ("body", try await trickledBody)] {
                    #expect(after >= .milliseconds(500), "a trickled \(name) on port \(port) was closed after \(after)")
                }
            }
        }
    }

    @Test(
        "not cut off by the idle timeout: an answer that waits 2.5 s for its provider, an upload sent steadily for longer than the timeout; an answer its client stops reading is cut off"
    )
    func slowButLiveConnections() async throws {
        let passthrough: @Sendable (inout GatewayConfiguration) -> Void = { configuration in
            let emulatorURL = String(configuration.github!.apiBaseURL.dropLast("/github-api".count))
            configuration.api = APIPolicy.sample(yahooBaseURL: "\(emulatorURL)/yahoo-fantasy")
        }
        try await withDeployment(gateway: passthrough, idleTimeout: .seconds(1)) { deployment in
            let (_, idToken, _) = try await GatewayTokenTests.signedIn(deployment)
            let port = try #require(URLComponents(string: deployment.gatewayURL)?.port)
            // On sockets of their own: an HTTP client would retry a request whose connection closed.
            _ = try await deployment.control("faults", #"{"endpoint": "GET /github-api/user", "delayMs": 2500, "times": 1}"#)
            let (head, waited) = try await LoopbackSocket.offPool {
                let caller = try LoopbackSocket.connect(port: port)
                defer { caller.close() }
                let started = ContinuousClock.now
                try caller.send(
                    "GET /v1/me/providers/github.com/profile HTTP/1.1\r\nHost: gatehouse\r\nAuthorization: Bearer \(idToken)\r\n\r\n")
                return (try caller.read(until: "\r\n\r\n"), ContinuousClock.now - started)
            }
            #expect(head.hasPrefix("HTTP/1.1 200"), "\(head)")
            #expect(waited >= .milliseconds(2500), "the profile answered after \(waited): the fault did not delay it")

            // 6,000 bytes in 20 pieces 100 ms apart: 2 s, at 3,000 bytes a second. The route
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
                for start in stride(from: 0, to: bytes.count, by: 300) {
                    try caller.send(String(decoding: bytes[start..<min(start + 300, bytes.count)], as: UTF8.self))
                    usleep(100_000)
                }
                return (try caller.read(until: "\r\n\r\n"), ContinuousClock.now - started)
            }
            #expect(upload.hasPrefix("HTTP/1.1 400"), "\(upload)")
            #expect(took >= .milliseconds(1900), "the upload took \(took)")

            // 6 MB that the caller does not read: the channel stays unwritable, and is closed a
            // timeout later, long before the provider call's own 25 s.
            _ = try await deployment.control(
                "faults", #"{"endpoint": "GET /github-api/user/repos", "status": 200, "bodyBytes": 6000000, "times": 1}"#)
            let (answered, received, closedAfter) = try await LoopbackSocket.offPool {
                let caller = try LoopbackSocket.connect(port: port, receiveBuffer: 4096)
                defer { caller.close() }
                let started = ContinuousClock.now
                try caller.send(
                    "GET /v1/me/providers/github.com/api/user/repos HTTP/1.1\r\nHost: gatehouse\r\nAuthorization: Bearer \(idToken)\r\n\r\n"
                )
                usleep(4_000_000)
                let head = try caller.read(until: "\r\n\r\n")
                let closing = try caller.readUntilClosed()
                return (head, head.utf8.count + closing.rest.count, closing.at - started)
            }
            #expect(answered.hasPrefix("HTTP/1.1 200"), "\(answered.prefix(300))")
            #expect(received < 6_000_000, "the whole answer arrived (\(received) bytes)")
            #expect(closedAfter < .seconds(20), "closed after \(closedAfter)")
        }
    }

    @Test("gatehouse serve reads GATEHOUSE_IDLE_TIMEOUT for both listeners")
    func serveSetting() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
        try await withRunningEmulator { emulatorURL in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("idle-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let gateway = try await ServeProcess.start(
                name: "idle", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                extra: ["GATEHOUSE_IDLE_TIMEOUT": "1"])
            defer { gateway.process.stop() }
            for url in [gateway.url, gateway.operationsURL] {
                let port = try #require(URLComponents(string: url)?.port)
                let closing = try await LoopbackSocket.offPool {
                    let silent = try LoopbackSocket.connect(port: port)
                    defer { silent.close() }
                    return try silent.readUntilClosed()
                }
                #expect(closing.rest.isEmpty, "\(url)\n\(gateway.logTail)")
            }
        }
    }
}
