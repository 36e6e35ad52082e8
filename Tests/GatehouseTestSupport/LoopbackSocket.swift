import Dispatch
import Foundation
import Glibc

/// A TCP connection to a loopback port, driven with blocking calls: a client that can stop
/// talking at any byte. Every call gives up after 20 s.
public struct LoopbackSocket: Sendable {
    /// The connection's socket.
    public let descriptor: Int32

    /// How a connection ended: the bytes that arrived before the peer closed it, and when.
    public struct Closing: Sendable {
        /// What arrived after the last read and before the end of the stream.
        public let rest: [UInt8]
        /// When the end of the stream was read.
        public let at: ContinuousClock.Instant
    }

    /// Runs `work` on a thread of its own rather than on Swift's cooperative pool, which the
    /// in-process servers need while `work` blocks.
    public static func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Connects to 127.0.0.1:`port`; `receiveBuffer` sets the socket's receive buffer (a client
    /// that reads slowly fills it soon).
    public static func connect(port: Int, receiveBuffer: Int32? = nil) throws -> LoopbackSocket {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw SocketFailure("socket: errno \(errno)") }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBuffer {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
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
            throw SocketFailure("connect to port \(port): errno \(error)")
        }
        return LoopbackSocket(descriptor: descriptor)
    }

    /// Sends all of `text`.
    public func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        guard Glibc.send(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else { throw SocketFailure("send: errno \(errno)") }
    }

    /// Reads until what arrived contains `marker`; returns it as text.
    public func read(until marker: String) throws -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: received, as: UTF8.self).contains(marker) {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { throw SocketFailure("recv before \(marker.debugDescription): \(count), errno \(errno)") }
            received += buffer[..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Reads until the peer closes the connection; throws when it is still open after 20 s.
    public func readUntilClosed() throws -> Closing {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count == 0 { return Closing(rest: received, at: .now) }
            // A reset is the peer closing too (it had unread bytes of ours).
            if count < 0, errno == ECONNRESET { return Closing(rest: received, at: .now) }
            guard count > 0 else { throw SocketFailure("the connection is still open after 20 s (errno \(errno))") }
            received += buffer[..<count]
        }
    }

    /// Sends `prefix`, then one byte `a` every `interval`, reading and dropping whatever the
    /// peer answers meanwhile, until the peer closes the connection (at most 20 s); returns when.
    public func trickle(after prefix: String, every interval: Duration) throws -> ContinuousClock.Instant {
        try send(prefix)
        let started = ContinuousClock.now
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now - started < .seconds(20) {
            if Glibc.send(descriptor, [UInt8(ascii: "a")], 1, Int32(MSG_NOSIGNAL)) != 1 { return .now }
            let next = ContinuousClock.now + interval
            while ContinuousClock.now < next {
                let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if count == 0 || (count < 0 && errno == ECONNRESET) { return .now }
                if count < 0 { usleep(10_000) }
            }
        }
        throw SocketFailure("the connection is still open after 20 s of a byte every \(interval)")
    }

    /// The TCP state of the server's end of this connection as `/proc/net/tcp` lists it (`01`:
    /// established), `nil` when it lists none. A server that closes a connection its client
    /// has not read leaves `01` at once, while its FIN still waits behind the unread bytes.
    public func peerState() throws -> String? {
        func port(_ read: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> UInt16 {
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { read(descriptor, $0, &length) } }
            return UInt16(bigEndian: address.sin_port)
        }
        let (local, remote) = (port(getsockname), port(getpeername))
        let server = String(format: "0100007F:%04X", remote)
        let client = String(format: "0100007F:%04X", local)
        // Read to its end with read(2): the kernel hands the table out a page at a time, and a
        // reader that trusts the file's size (0) or one read sees only its first rows.
        let file = Glibc.open("/proc/net/tcp", O_RDONLY)
        guard file >= 0 else { throw SocketFailure("/proc/net/tcp: errno \(errno)") }
        defer { Glibc.close(file) }
        var table: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = Glibc.read(file, &buffer, buffer.count)
            guard count > 0 else { break }
            table += buffer[..<count]
        }
        for line in String(decoding: table, as: UTF8.self).split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            if fields.count > 3, fields[1] == server, fields[2] == client { return String(fields[3]) }
        }
        return nil
    }

    /// Closes the connection.
    public func close() {
        Glibc.close(descriptor)
    }
}

/// Why a loopback socket call failed.
public struct SocketFailure: Error, CustomStringConvertible {
    /// What happened.
    public let description: String
    /// A failure saying `description`.
    public init(_ description: String) { self.description = description }
}
