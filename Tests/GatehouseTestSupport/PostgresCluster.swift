import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A private PostgreSQL cluster for tests that stop and start the server (a restart must not
/// disturb the shared server other tests use). Made with the binaries `scripts/postgres` found.
public final class PostgresCluster: Sendable {
    /// The loopback port it listens on.
    public let port: Int
    private let folder: String
    private let bin: String
    /// The throwaway certificates when the server speaks TLS.
    public let certificates: TestCertificates?

    /// The superuser's password when the cluster asks for one (SCRAM), else `nil` (trust).
    public let password: String?

    /// A superuser URL to its `postgres` database.
    public var url: String {
        "postgres://gatehouse\(password.map { ":" + $0 } ?? "")@127.0.0.1:\(port)/postgres?sslmode=disable"
    }

    /// Runs `initdb` in a new temporary folder; with `tls`, the server gets a certificate that
    /// names only `localhost`, from a throwaway CA (`certificates.caPath`); with `password`,
    /// every connection must give it (SCRAM-SHA-256) instead of being trusted.
    public init(tls: Bool = false, password: String? = nil) async throws {
        guard let bin = ProcessInfo.processInfo.environment["GATEHOUSE_TEST_PG_BIN"] else {
            throw PostgresStorageTestError("GATEHOUSE_TEST_PG_BIN is not set; run the tests with scripts/test or scripts/postgres")
        }
        self.bin = bin
        self.password = password
        // Directly under /tmp, or scripts/test's tmpfs (GATEHOUSE_TEST_SCRATCH, mode 1777): the
        // `postgres` user must be able to reach it.
        let temporary = ProcessInfo.processInfo.environment["GATEHOUSE_TEST_SCRATCH"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        folder = "\(temporary)/gatehouse-pg-cluster-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        port = try TestTools.freeStablePort()
        certificates = tls ? try await TestCertificates.make(in: folder, subjectAltName: "DNS:localhost") : nil
        if tls { _ = chmod(folder + "/server.key", 0o600) }
        var authentication = ["--auth=trust"]
        if let password {
            try Data(password.utf8).write(to: URL(fileURLWithPath: folder + "/password"))
            authentication = ["--auth=scram-sha-256", "--pwfile=" + folder + "/password"]
        }
        if getuid() == 0 { try await TestTools.run("chown", ["-R", "postgres", folder]) }
        try await tool("initdb", ["-D", folder + "/data", "-U", "gatehouse", "-E", "UTF8", "--no-locale"] + authentication)
    }

    /// Starts the server and waits until it accepts connections.
    public func start() async throws {
        try await withLog {
            try await tool(
                "pg_ctl",
                [
                    "-D", folder + "/data", "-l", folder + "/server.log", "-w", "-t", "60", "-o",
                    "-h 127.0.0.1 -p \(port) -k \(folder) -c fsync=off -c max_connections=50" + tlsOptions, "start",
                ])
        }
    }

    /// Runs a pg_ctl step; a failure carries the end of the server's log.
    private func withLog(_ step: () async throws -> Void) async throws {
        do {
            try await step()
        } catch {
            let log = (try? String(contentsOfFile: folder + "/server.log", encoding: .utf8)) ?? ""
            throw TestToolError("\(error) — server log: \(log.split(separator: "\n").suffix(8).joined(separator: " | "))")
        }
    }

    private var tlsOptions: String {
        guard let certificates else { return "" }
        return " -c ssl=on -c ssl_cert_file=\(certificates.certificatePath) -c ssl_key_file=\(certificates.keyPath)"
    }

    /// Stops the server (fast shutdown: open connections are closed).
    public func stop() async throws {
        try await withLog { try await tool("pg_ctl", ["-D", folder + "/data", "-m", "fast", "-w", "stop"]) }
    }

    /// Crashes the server: an immediate stop, as a power cut or a killed postmaster would
    /// (no checkpoint; connections cut; the next start recovers from the WAL).
    public func crash() async throws {
        try await withLog { try await tool("pg_ctl", ["-D", folder + "/data", "-m", "immediate", "-w", "stop"]) }
    }

    /// Stops the server if it runs and deletes its files.
    public func destroy() {
        // Synchronous for `defer`; an immediate stop is quick.
        let command = getuid() == 0 ? ("runuser", ["-u", "postgres", "--", bin + "/pg_ctl"]) : (bin + "/pg_ctl", [])
        try? TestTools.runBlocking(command.0, command.1 + ["-D", folder + "/data", "-m", "immediate", "stop"])
        try? FileManager.default.removeItem(atPath: folder)
    }

    private func tool(_ name: String, _ arguments: [String]) async throws {
        // PostgreSQL refuses to run as root: as root, run it as the `postgres` user.
        if getuid() == 0 {
            try await TestTools.run("runuser", ["-u", "postgres", "--", bin + "/" + name] + arguments)
        } else {
            try await TestTools.run(bin + "/" + name, arguments)
        }
    }
}
