import Foundation
import Synchronization

/// Finds a free loopback port by binding port 0 and reading what the kernel chose.
public enum LoopbackPort {
    /// Ports already handed out by this process: the kernel may offer a just-closed port
    /// again, and two servers of one process must never be given the same one.
    private static let handedOut = Mutex<Set<Int>>([])

    /// A port that was free on 127.0.0.1 a moment ago and not handed out before.
    public static func pick() throws -> Int {
        for _ in 0..<50 {
            let port = try candidate()
            let fresh = handedOut.withLock { $0.insert(port).inserted }
            if fresh { return port }
        }
        throw LoopbackPortError("no unused loopback port found")
    }

    private static func candidate() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LoopbackPortError("no socket for a free port") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0 else { throw LoopbackPortError("could not bind a free port") }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// Why no free port could be found.
public struct LoopbackPortError: Error {
    /// What failed.
    public let message: String
    init(_ message: String) { self.message = message }
}
