import Dispatch
import Foundation
import GatehouseCore
import Glibc
import Testing

/// Connections that stop talking: both listeners close a connection idle for
/// `GATEHOUSE_IDLE_TIMEOUT`, whether it waits between requests, never sent a byte or stopped
/// halfway through a request head, so that clients that go quiet cannot hold descriptors and
/// memory for ever; a request still being answered is never cut off.
@Suite("Idle connections")
struct IdleConnectionTests {
    @Test(
        "a keep-alive connection left idle after its answer, one that never sends a byte and one whose request head stops halfway are closed once the idle timeout passes, on both listeners; an answer slower than the timeout still arrives"
    )
    func idleConnectionsClose() async throws {
        try await withDeployment(idleTimeout: .seconds(1)) { deployment in
            let (_, idToken, _) = try await GatewayTokenTests.signedIn(deployment)
            let ports = [
                try #require(URLComponents(string: deployment.gatewayURL)?.port),
                try #require(URLComponents(string: deployment.operationsURL)?.port),
            ]
            for port in ports {
                let closings = try await LoopbackSocket.offPool {
                    let answered = try LoopbackSocket.connect(port: port)
                    let silent = try LoopbackSocket.connect(port: port)
                    let halfway = try LoopbackSocket.connect(port: port)
                    defer { [answered, silent, halfway].forEach { $0.close() } }
                    let opened = ContinuousClock.now
                    try halfway.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nAccept: ")
                    try answered.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n")
                    let answer = try answered.read(until: #""status""#)
                    let idleSince = ContinuousClock.now
                    return [
                        ("answered", answer, try answered.readUntilClosed(), idleSince),
                        ("silent", "", try silent.readUntilClosed(), opened),
                        ("halfway", "", try halfway.readUntilClosed(), opened),
                    ]
                }
                for (name, answer, closing, since) in closings {
                    if name == "answered" { #expect(answer.hasPrefix("HTTP/1.1 200"), "port \(port): \(answer)") }
                    #expect(closing.rest.isEmpty, "\(name) on port \(port) received \(closing.rest.count) bytes before it was closed")
                    // The timer starts when the answer is written or the connection accepted,
                    // both before the client's clock starts; only a close before the timeout fails.
                    #expect(closing.at - since >= .milliseconds(500), "\(name) on port \(port) was closed after \(closing.at - since)")
                }
            }

            // A call in flight is not idle: GitHub answers after 2.5 s, the timeout is 1 s. On a
            // socket of its own, since an HTTP client would retry a request whose connection closed.
            _ = try await deployment.control("faults", #"{"endpoint": "GET /github-api/user", "delayMs": 2500, "times": 1}"#)
            let (head, waited) = try await LoopbackSocket.offPool {
                let caller = try LoopbackSocket.connect(port: ports[0])
                defer { caller.close() }
                let started = ContinuousClock.now
                try caller.send(
                    "GET /v1/me/providers/github.com/profile HTTP/1.1\r\nHost: gatehouse\r\nAuthorization: Bearer \(idToken)\r\n\r\n")
                return (try caller.read(until: "\r\n\r\n"), ContinuousClock.now - started)
            }
            #expect(head.hasPrefix("HTTP/1.1 200"), "\(head)")
            #expect(waited >= .milliseconds(2500), "the profile answered after \(waited): the fault did not delay it")
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

/// A TCP connection to a loopback port, driven with blocking calls: a client that can stop
/// talking at any byte. Every call gives up after 20 s.
struct LoopbackSocket: Sendable {
    let descriptor: Int32

    /// How a connection ended: the bytes that arrived before the peer closed it, and when.
    struct Closing: Sendable {
        /// What arrived after the last read and before the end of the stream.
        let rest: [UInt8]
        /// When the end of the stream was read.
        let at: ContinuousClock.Instant
    }

    /// Runs `work` on a thread of its own rather than on Swift's cooperative pool, which the
    /// in-process servers need while `work` blocks.
    static func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Connects to 127.0.0.1:`port`.
    static func connect(port: Int) throws -> LoopbackSocket {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw FlowError("socket: errno \(errno)") }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let error = errno
            Glibc.close(descriptor)
            throw FlowError("connect to port \(port): errno \(error)")
        }
        return LoopbackSocket(descriptor: descriptor)
    }

    /// Sends all of `text`.
    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        guard Glibc.send(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else { throw FlowError("send: errno \(errno)") }
    }

    /// Reads until what arrived contains `marker`; returns it as text.
    func read(until marker: String) throws -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: received, as: UTF8.self).contains(marker) {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { throw FlowError("recv before \(marker.debugDescription): \(count), errno \(errno)") }
            received += buffer[..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Reads until the peer closes the connection; throws when it is still open after 20 s.
    func readUntilClosed() throws -> Closing {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count == 0 { return Closing(rest: received, at: .now) }
            // A reset is the peer closing too (it had unread bytes of ours).
            if count < 0, errno == ECONNRESET { return Closing(rest: received, at: .now) }
            guard count > 0 else { throw FlowError("the connection is still open after 20 s (errno \(errno))") }
            received += buffer[..<count]
        }
    }

    /// Closes the connection.
    func close() {
        Glibc.close(descriptor)
    }
}
