import Foundation
import Glibc
import Synchronization

/// A TCP proxy on 127.0.0.1 in front of a server, which can turn every connection through it
/// into a black hole: from `blackHole()` on, what either side sends is swallowed and nothing
/// is closed, as when a network drops packets without a reset (a half-open connection). In
/// front of PostgreSQL it can also drop one parameter of each connection's startup message,
/// as a pooler that ignores startup parameters does (PgBouncer's `ignore_startup_parameters`).
final class BlackHoleProxy: Sendable {
    /// The proxy's port.
    let port: Int
    /// The startup parameter left out of each connection's first message (`nil`: none).
    private let droppedParameter: String?
    private let listener: Int32
    private let swallowing = Atomic<Bool>(false)
    private let closed = Atomic<Bool>(false)
    private let descriptors = Mutex<[Int32]>([])
    /// Whether the accept loop has closed the listener (then `close()` must not touch its number).
    private let listenerClosed = Mutex(false)

    /// Listens on a port of its own and forwards each connection to `targetPort` on 127.0.0.1,
    /// without `droppingStartupParameter` in its PostgreSQL startup message when one is named
    /// (the client must not ask for TLS then).
    init(targetPort: Int, droppingStartupParameter: String? = nil) throws {
        droppedParameter = droppingStartupParameter
        let descriptor = try Self.socketBound(port: 0)
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
        listener = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop(targetPort: targetPort) }
        thread.start()
    }

    /// Swallows everything from now on, on every connection, open or new.
    func blackHole() { swallowing.store(true, ordering: .sequentiallyConsistent) }

    /// Stops listening and closes every connection.
    func close() {
        closed.store(true, ordering: .sequentiallyConsistent)
        listenerClosed.withLock { if !$0 { shutdown(listener, Int32(SHUT_RDWR)) } }
        descriptors.withLock { open in
            for descriptor in open { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop(targetPort: Int) {
        while !closed.load(ordering: .sequentiallyConsistent) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard server >= 0 else {
                Glibc.close(client)
                continue
            }
            var address = Self.loopback(port: targetPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                Glibc.close(client)
                Glibc.close(server)
                continue
            }
            descriptors.withLock { open in
                open += [client, server]
                // Accepted while `close()` ran: shut down like the others.
                if closed.load(ordering: .sequentiallyConsistent) {
                    shutdown(client, Int32(SHUT_RDWR))
                    shutdown(server, Int32(SHUT_RDWR))
                }
            }
            // The second pump to end closes both sockets.
            let ended = Mutex(0)
            let finish = { @Sendable in
                guard
                    ended.withLock({ count in
                        count += 1
                        return count == 2
                    })
                else { return }
                // Under the lock that `close()` shuts sockets down under: a number closed here
                // may be another socket's next, which `close()` must not touch.
                self.descriptors.withLock { open in
                    open.removeAll { $0 == client || $0 == server }
                    Glibc.close(client)
                    Glibc.close(server)
                }
            }
            Thread { [self] in
                if droppedParameter == nil || forwardStartup(from: client, to: server) { pump(from: client, to: server) }
                finish()
            }.start()
            Thread { [self] in
                pump(from: server, to: client)
                finish()
            }.start()
        }
        listenerClosed.withLock { done in
            done = true
            Glibc.close(listener)
        }
    }

    private func pump(from source: Int32, to target: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while !closed.load(ordering: .sequentiallyConsistent) {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            // Swallowed: the sender's write succeeded, and nothing reaches the other side.
            if swallowing.load(ordering: .sequentiallyConsistent) { continue }
            var sent = 0
            while sent < count {
                let written = buffer.withUnsafeBytes { write(target, $0.baseAddress! + sent, count - sent) }
                guard written > 0 else { return }
                sent += written
            }
        }
        shutdown(target, Int32(SHUT_WR))
    }

    /// Reads the client's PostgreSQL startup message (a length, the protocol version, then
    /// `name\0value\0` pairs and a closing `\0`) and sends it on without the dropped
    /// parameter; `false` when the message could not be read or sent.
    private func forwardStartup(from source: Int32, to target: Int32) -> Bool {
        guard let head = readExactly(source, count: 4) else { return false }
        let length = head.reduce(0) { $0 << 8 | Int($1) }
        guard length >= 8, length <= 10_000, let rest = readExactly(source, count: length - 4) else { return false }
        var fields = rest.dropFirst(4).split(separator: 0, omittingEmptySubsequences: false).map(Array.init)
        guard fields.count >= 2 else { return false }
        fields.removeLast(2)  // the closing zero byte makes two empty fields
        var kept: [UInt8] = Array(rest.prefix(4))
        for index in stride(from: 0, to: fields.count - 1, by: 2) where fields[index] != Array((droppedParameter ?? "").utf8) {
            kept += fields[index] + [0] + fields[index + 1] + [0]
        }
        kept.append(0)
        let total = kept.count + 4
        let message = [UInt8(total >> 24 & 0xFF), UInt8(total >> 16 & 0xFF), UInt8(total >> 8 & 0xFF), UInt8(total & 0xFF)] + kept
        return message.withUnsafeBytes { write(target, $0.baseAddress, $0.count) } == message.count
    }

    /// Exactly `count` bytes from `source`, or `nil` when it ends before.
    private func readExactly(_ source: Int32, count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes.withUnsafeMutableBytes { read(source, $0.baseAddress! + filled, count - filled) }
            guard got > 0 else { return nil }
            filled += got
        }
        return bytes
    }

    /// `127.0.0.1:port`.
    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return address
    }

    private static func socketBound(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = loopback(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard descriptor >= 0, bound, listen(descriptor, 16) == 0 else {
            if descriptor >= 0 { Glibc.close(descriptor) }
            throw POSIXError(.EADDRNOTAVAIL)
        }
        return descriptor
    }
}
