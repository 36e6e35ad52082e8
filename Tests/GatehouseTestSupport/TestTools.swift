import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Running the command-line tools the tests use (openssl, PostgreSQL's, nghttpd) and picking ports.
public enum TestTools {
    /// A tool on PATH or in the sbin folders (Debian installs nghttpd and runuser there).
    public static func executable(_ name: String) throws -> String {
        if name.hasPrefix("/") { return name }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let folders = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/local/sbin", "/sbin"]
        for folder in folders where FileManager.default.isExecutableFile(atPath: "\(folder)/\(name)") {
            return "\(folder)/\(name)"
        }
        throw TestToolError("\(name) is not installed (scripts/install-deps --test installs it)")
    }

    /// Runs a tool to completion (`SpawnedProcess`: posix_spawn, waitpid on that one pid),
    /// output discarded; throws unless it exits 0.
    public static func run(_ tool: String, _ arguments: [String]) async throws {
        let status = await (try SpawnedProcess.start(try executable(tool), arguments)).exited()
        guard SpawnedProcess.exitCode(status) == 0 else {
            throw TestToolError("\(tool) \(arguments.first ?? "") failed (wait status \(status))")
        }
    }

    /// `run` for synchronous cleanup (`defer`) of quick tools only: it blocks its thread.
    public static func runBlocking(_ tool: String, _ arguments: [String]) throws {
        let status = try SpawnedProcess.start(try executable(tool), arguments).wait()
        guard SpawnedProcess.exitCode(status) == 0 else {
            throw TestToolError("\(tool) \(arguments.first ?? "") failed (wait status \(status))")
        }
    }

    /// Stable ports this process handed out already: two servers of one run never get the same one.
    private static let handedOut = Mutex<Set<Int>>([])

    /// A free port below the kernel's ephemeral range (32768–60999 by default), for servers
    /// that cannot report the port they bound (another program: nghttpd, oidc-provider-mock,
    /// PostgreSQL) or bind it again after a restart. Servers of this process bind port 0 and
    /// report what they got, and the kernel never hands out a port of this range for port 0
    /// or an outgoing connection, so none of them can grab it in between; nor can another
    /// pick of this run.
    public static func freeStablePort() throws -> Int {
        for _ in 0..<100 {
            let candidate = Int.random(in: 20_000..<30_000)
            guard handedOut.withLock({ $0.insert(candidate).inserted }), let (fd, port) = bindLoopback(candidate) else { continue }
            close(fd)
            return port
        }
        throw TestToolError("no free loopback port between 20000 and 30000")
    }

    /// A socket bound to `port` (0: any) on 127.0.0.1 but not listening, and its port; `nil`
    /// when the port is taken. Held open, it reserves a port that refuses connections; the
    /// caller closes it.
    public static func bindLoopback(_ port: Int) -> (fd: Int32, port: Int)? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            close(fd)
            return nil
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}

/// A throwaway CA and a server certificate signed by it, made with the `openssl` CLI.
public struct TestCertificates: Sendable {
    /// The CA's PEM file (what clients trust).
    public let caPath: String
    /// The server certificate's PEM file.
    public let certificatePath: String
    /// The server's private key (PEM, unencrypted).
    public let keyPath: String

    /// Writes the files into `folder`; `subjectAltName` is what the certificate names
    /// (`IP:127.0.0.1`, `DNS:localhost,IP:127.0.0.1`).
    public static func make(in folder: String, subjectAltName: String = "IP:127.0.0.1") async throws -> TestCertificates {
        let path = { (name: String) in (folder as NSString).appendingPathComponent(name) }
        try await TestTools.run(
            "openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj",
                "/CN=Gatehouse Test CA", "-keyout", path("ca.key"), "-out", path("ca.pem"),
            ])
        try await TestTools.run(
            "openssl",
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout",
                path("server.key"), "-out", path("server.csr"),
            ])
        try "subjectAltName=\(subjectAltName)\n".write(toFile: path("san.ext"), atomically: true, encoding: .utf8)
        try await TestTools.run(
            "openssl",
            [
                "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"), "-CAcreateserial", "-days", "1",
                "-extfile", path("san.ext"), "-out", path("server.pem"),
            ])
        return TestCertificates(caPath: path("ca.pem"), certificatePath: path("server.pem"), keyPath: path("server.key"))
    }
}

/// A test tool failed or is missing.
public struct TestToolError: Error, CustomStringConvertible {
    /// What happened.
    public let description: String

    /// An error with this description.
    public init(_ description: String) { self.description = description }
}
