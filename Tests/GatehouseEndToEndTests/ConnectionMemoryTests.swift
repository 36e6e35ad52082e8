import Foundation
import GatehouseCore
import GatehouseTestSupport
import Testing

/// What an idle connection keeps of the requests it served, on a `gatehouse serve` process of
/// its own: the growth of its anonymous memory (`/proc/PID/smaps_rollup`) while connections are
/// held open, with freed memory handed back to the system every second
/// (`GATEHOUSE_HEAP_TRIM_INTERVAL`).
@Suite("Memory of idle connections")
struct ConnectionMemoryTests {
    /// The process's anonymous memory in KB.
    static func anonymousKB(_ pid: pid_t) throws -> Int {
        let text = try String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("Anonymous:") })
        return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    /// Sends a 1 MB body to a route that does not exist, then asks for `/healthz` on the same
    /// connection; returns the connection, open.
    static func afterLargeBody(port: Int) throws -> LoopbackSocket {
        let socket = try LoopbackSocket.connect(port: port)
        do {
            try socket.send(
                "POST /v1/nowhere HTTP/1.1\r\nHost: gatehouse\r\nContent-Length: \(1 << 20)\r\n\r\n" + String(repeating: "x", count: 1 << 20))
            _ = try socket.read(until: "404 Not Found")
            try socket.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n")
            _ = try socket.read(until: #""status":"ok"}"#)
            return socket
        } catch {
            socket.close()
            throw error
        }
    }

    @Test(
        "a connection left idle after a 1 MB body, even to a route that refuses it, keeps under 96 KB (NIO's default receive buffers kept about 280 KB)"
    )
    func largeBodiesLeaveLittle() async throws {
        try await withEmulatorAndFolder("gatehouse-memory") { emulatorURL, folder in
            let serve = try await ServeProcess.start(
                name: "memory", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                extra: ["GATEHOUSE_HEAP_TRIM_INTERVAL": "1"])
            defer { serve.process.stop() }
            let port = try #require(URLComponents(string: serve.url)?.port)
            let pid = serve.process.pid
            // What the first such request allocates once (caches, the runtime's metadata) is not a
            // connection's; the baseline is the lowest of the samples over more than one trim.
            try await LoopbackSocket.offPool { try Self.afterLargeBody(port: port).close() }
            var before = Int.max
            for _ in 0..<8 {
                before = min(before, try Self.anonymousKB(pid))
                try await Task.sleep(for: .milliseconds(200))
            }
            let count = 48
            let held = try await LoopbackSocket.offPool {
                var held: [LoopbackSocket] = []
                do {
                    for _ in 0..<count { held.append(try Self.afterLargeBody(port: port)) }
                } catch {
                    held.forEach { $0.close() }
                    throw error
                }
                return held
            }
            defer { held.forEach { $0.close() } }
            // The bodies' buffers are freed as they are drained and handed back at the next trim:
            // what stays is what the connections keep.
            var perConnection = Int.max
            for _ in 0..<50 where perConnection >= 96 {
                perConnection = (try Self.anonymousKB(pid) - before) / count
                if perConnection >= 96 { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(perConnection < 96, "\(perConnection) KB per idle connection")
        }
    }
}
