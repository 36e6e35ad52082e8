import CurlClient
import Foundation
import Glibc
import Testing

/// A TCP listener on 127.0.0.1 that accepts nothing: connections wait in its backlog and
/// a request sent on one is never answered. Closed by `close()`.
struct SilentListener {
    let descriptor: Int32
    let port: Int

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.descriptor = descriptor
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && listen(descriptor, 8) == 0
                    && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard descriptor >= 0, bound else { throw POSIXError(.EADDRNOTAVAIL) }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Glibc.close(descriptor) }
}

extension SilentListener {
    /// The total timeout for a client whose slot ``hold(_:)`` takes: far beyond any test's
    /// length, so the held call ends only when the test cancels it, however loaded the machine.
    static let held = Duration.seconds(3600)

    /// Holds the one slot of `http` (a client with `maxTransfers: 1`) with a call this
    /// listener never answers, until the returned task is cancelled.
    func hold(_ http: CurlHTTPClient) async throws -> Task<OutboundResponse, any Error> {
        let holding = Task { try await http.execute(OutboundRequest(url: "http://127.0.0.1:\(port)/held")) }
        var held = false
        for _ in 0..<500 where !held {
            held = http.load.inFlight == 1
            if !held { try await Task.sleep(for: .milliseconds(20)) }
        }
        try #require(held, "the held call started")
        return holding
    }
}

extension SilentListener {
    /// Answers the next connection with `answer` (the bytes as they are, framing included)
    /// once its request head has arrived, then closes it.
    func answerOnce(_ answer: [UInt8]) {
        let descriptor = self.descriptor
        Thread.detachNewThread {
            let connection = accept(descriptor, nil, nil)
            guard connection >= 0 else { return }
            defer { _ = Glibc.close(connection) }
            var request: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while request.count < 65_536, request.firstRange(of: Array("\r\n\r\n".utf8)) == nil {
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { return }
                request += buffer.prefix(count)
            }
            _ = answer.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
        }
    }
}
