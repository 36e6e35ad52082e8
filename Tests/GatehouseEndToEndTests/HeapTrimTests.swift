import Foundation
import GatehouseCore
import GatehouseTestSupport
import Glibc
import Testing

/// After a spike of connections the gateway gives back what they cost: `gatehouse serve` (and `demo`)
/// returns the memory its allocator holds free to the system every
/// `GATEHOUSE_HEAP_TRIM_INTERVAL`. Measured on a child process, whose memory is its own.
@Suite("Memory after a spike of connections")
struct HeapTrimTests {
    /// `pid`'s anonymous resident memory (`RssAnon`), in KB.
    static func anonymousKilobytes(_ pid: pid_t) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
            let value = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap({ Int($0) })
        else { throw FlowError("no RssAnon in /proc/\(pid)/status") }
        return value
    }

    /// `count` keep-alive connections to 127.0.0.1:`port`, each with one `/healthz` answered.
    static func idleConnections(port: Int, count: Int) throws -> [Int32] {
        var held: [LoopbackSocket] = []
        do {
            for _ in 0..<count {
                let connection = try LoopbackSocket.connect(port: port)
                held.append(connection)
                try connection.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n")
                _ = try connection.read(until: #""status""#)
            }
        } catch {
            held.forEach { $0.close() }
            throw error
        }
        return held.map(\.descriptor)
    }

    /// Raises this process's descriptor limit for 3,000 sockets here and as many in the
    /// gateway, which inherits it.
    static func raiseDescriptorLimit() throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < 8192 {
            limit.rlim_cur = min(limit.rlim_max, 8192)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        try #require(limit.rlim_cur >= 6500, "the descriptor limit (\(limit.rlim_cur)) is too low for 3,000 connections; raise ulimit -Hn")
    }

    /// Opens and closes 3,000 idle connections to the gateway `pid` listening on `port`, and
    /// checks that within 15 s its anonymous memory is back within a quarter of their cost.
    static func spikeReturns(pid: pid_t, port: Int, logTail: () -> String) async throws {
        // A first small wave: what every process allocates once (metadata, pools) is not the spike's.
        // The sockets block: their round trips run off Swift's cooperative pool, whose two
        // threads the other tests' in-process servers need meanwhile.
        try await LoopbackSocket.offPool { try Self.idleConnections(port: port, count: 100) }.forEach { _ = close($0) }
        try await Task.sleep(for: .seconds(2))
        let before = try Self.anonymousKilobytes(pid)
        let held = try await LoopbackSocket.offPool { try Self.idleConnections(port: port, count: 3000) }
        let during = try Self.anonymousKilobytes(pid)
        held.forEach { _ = close($0) }
        // The spike must have cost something for its return to be measured.
        try #require(during - before >= 20 << 10, "3,000 connections cost only \(during - before) KB")
        let bound = before + (during - before) / 4
        let waiting = ContinuousClock.now
        var now = try Self.anonymousKilobytes(pid)
        while now > bound, ContinuousClock.now - waiting < .seconds(15) {
            try await Task.sleep(for: .milliseconds(250))
            now = try Self.anonymousKilobytes(pid)
        }
        #expect(now <= bound, "anonymous memory \(before) KB before, \(during) KB with the connections, \(now) KB 15 s after\n\(logTail())")
    }

    @Test("3,000 idle keep-alive connections closed: within 15 s the gateway's anonymous memory is back within a quarter of their cost")
    func memoryReturnsAfterSpike() async throws {
        try Self.raiseDescriptorLimit()
        try await withEmulatorAndFolder("heap-trim") { emulatorURL, folder in
            let gateway = try await ServeProcess.start(
                name: "trim", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                extra: ["GATEHOUSE_HEAP_TRIM_INTERVAL": "1"])
            defer { gateway.process.stop() }
            try await Self.spikeReturns(pid: gateway.process.pid, port: try #require(URLComponents(string: gateway.url)?.port)) {
                gateway.logTail
            }
        }
    }

    @Test("gatehouse demo gives the memory back too (GATEHOUSE_HEAP_TRIM_INTERVAL)")
    func demoMemoryReturnsAfterSpike() async throws {
        try Self.raiseDescriptorLimit()
        var environment = ProcessInfo.processInfo.environment
        environment["GATEHOUSE_HEAP_TRIM_INTERVAL"] = "1"
        try await DemoProcess.with(executable: KeysCommandTests.executable.path, environment: environment) { demo in
            try await Self.spikeReturns(pid: demo.process.pid, port: try #require(URLComponents(string: demo.url)?.port)) {
                (try? String(contentsOfFile: demo.folder + ".out", encoding: .utf8)).map { String($0.suffix(2000)) } ?? ""
            }
        }
    }
}
