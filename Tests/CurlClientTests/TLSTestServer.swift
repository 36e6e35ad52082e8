import Foundation
import GatehouseTestSupport

/// A real HTTP/2 server over TLS for the client's tests: `nghttpd` (Debian `nghttp2-server`)
/// serving a folder, with a throwaway CA and server certificate made by the `openssl` CLI.
///
/// The server certificate names only `IP:127.0.0.1`, so `https://localhost:…` is a host-name
/// mismatch on the same server.
final class TLSTestServer: Sendable {
    /// The PEM file of the throwaway CA.
    let caBundlePath: String
    /// The port nghttpd listens on.
    let port: Int
    private let process: SpawnedProcess
    private let folder: URL

    private init(caBundlePath: String, port: Int, process: SpawnedProcess, folder: URL) {
        self.caBundlePath = caBundlePath
        self.port = port
        self.process = process
        self.folder = folder
    }

    /// `https://127.0.0.1:<port><path>`.
    func url(_ path: String, host: String = "127.0.0.1") -> String { "https://\(host):\(port)\(path)" }

    /// Makes the certificates, writes `files` into the document root and starts nghttpd.
    static func start(files: [String: Data]) async throws -> TLSTestServer {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-tls-\(UUID().uuidString)")
        let htdocs = folder.appendingPathComponent("htdocs")
        try FileManager.default.createDirectory(at: htdocs, withIntermediateDirectories: true)
        for (name, data) in files { try data.write(to: htdocs.appendingPathComponent(name)) }
        let certificates = try await TestCertificates.make(in: folder.path)
        let port = try TestTools.freeStablePort()
        let process = try SpawnedProcess.start(
            try TestTools.executable("nghttpd"),
            ["--address=127.0.0.1", "--htdocs=\(htdocs.path)", String(port), certificates.keyPath, certificates.certificatePath])
        let server = TLSTestServer(caBundlePath: certificates.caPath, port: port, process: process, folder: folder)
        // Bounded wait for the listening socket.
        for _ in 0..<300 {
            if canConnect(port: port) { return server }
            try await Task.sleep(for: .milliseconds(50))
        }
        server.stop()
        throw TLSTestServerError("nghttpd did not start listening on port \(port)")
    }

    /// Stops nghttpd and removes the certificates.
    func stop() {
        process.stop()
        try? FileManager.default.removeItem(at: folder)
    }

    private static func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}

/// The TLS test server could not be set up.
struct TLSTestServerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
