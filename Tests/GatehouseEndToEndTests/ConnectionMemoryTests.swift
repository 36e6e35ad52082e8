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
        let anonymous = text.split(separator: "\n").first { $0.hasPrefix("Anonymous:") }
        let line = try #require(anonymous)
        return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    /// Sends `body` to a route that does not exist, then asks for `/healthz` on the same
    /// connection; returns the connection, open.
    static func afterBody(of size: Int, port: Int) throws -> LoopbackSocket {
        let socket = try LoopbackSocket.connect(port: port)
        do {
            try socket.send(
                "POST /v1/nowhere HTTP/1.1\r\nHost: gatehouse\r\nContent-Length: \(size)\r\n\r\n" + String(repeating: "x", count: size))
            _ = try socket.read(until: "404 Not Found")
            try socket.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n")
            _ = try socket.read(until: #""status":"ok"}"#)
            return socket
        } catch {
            socket.close()
            throw error
        }
    }

    /// The lowest of the process's anonymous memory over 1.6 s, more than one heap trim: what
    /// it keeps, without what it has freed since the last trim.
    static func settledKB(_ pid: pid_t) async throws -> Int {
        var lowest = Int.max
        for _ in 0..<9 {
            lowest = min(lowest, try anonymousKB(pid))
            try await Task.sleep(for: .milliseconds(200))
        }
        return lowest
    }

    /// `count` connections opened by `open`, held for `body`.
    static func holding<T>(
        _ count: Int, _ open: @escaping @Sendable () throws -> LoopbackSocket, _ body: () async throws -> T
    ) async throws -> T {
        let held = try await LoopbackSocket.offPool {
            var held: [LoopbackSocket] = []
            do {
                for _ in 0..<count { held.append(try open()) }
            } catch {
                held.forEach { $0.close() }
                throw error
            }
            return held
        }
        defer { held.forEach { $0.close() } }
        return try await body()
    }

    @Test(
        "a connection left idle after a 1 MB body, even to a route that refuses it, keeps at most 40 KB more than one after the same request without a body; NIO's default receive buffers kept about 260 KB more"
    )
    func largeBodiesLeaveLittle() async throws {
        try await withEmulatorAndFolder("gatehouse-memory") { emulatorURL, folder in
            let serve = try await ServeProcess.start(
                name: "memory", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                extra: ["GATEHOUSE_HEAP_TRIM_INTERVAL": "1"])
            defer { serve.process.stop() }
            let port = try #require(URLComponents(string: serve.url)?.port)
            let pid = serve.process.pid
            let count = 48
            // What the first such requests allocate once (caches, the runtime's metadata) is not
            // a connection's.
            try await LoopbackSocket.offPool {
                try Self.afterBody(of: 1 << 20, port: port).close()
                try Self.afterBody(of: 0, port: port).close()
            }
            let start = try await Self.settledKB(pid)
            try await Self.holding(count, { try Self.afterBody(of: 0, port: port) }) {
                let short = try await Self.settledKB(pid)
                try await Self.holding(count, { try Self.afterBody(of: 1 << 20, port: port) }) {
                    // The bodies' buffers are freed as they are drained and handed back at the
                    // next trim: what stays is what the connections keep.
                    var more = Int.max
                    for _ in 0..<50 where more > 40 {
                        more = (try Self.anonymousKB(pid) - short) / count - (short - start) / count
                        if more > 40 { try await Task.sleep(for: .milliseconds(200)) }
                    }
                    #expect(
                        more <= 40, "\(more) KB more per idle connection after a 1 MB body than without it (\((short - start) / count) KB)"
                    )
                }
            }
        }
    }
}
