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

    /// A superuser URL to its `postgres` database.
    public var url: String { "postgres://gatehouse@127.0.0.1:\(port)/postgres?sslmode=disable" }

    /// Runs `initdb` in a new temporary folder.
    public init() throws {
        guard let bin = ProcessInfo.processInfo.environment["GATEHOUSE_TEST_PG_BIN"] else {
            throw PostgresStorageTestError("GATEHOUSE_TEST_PG_BIN is not set; run the tests with scripts/test or scripts/postgres")
        }
        self.bin = bin
        // Directly under /tmp: the `postgres` user must be able to reach it.
        folder = "/tmp/gatehouse-pg-cluster-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        port = try Self.freePort()
        if getuid() == 0 { try Self.run("/usr/bin/chown", ["postgres", folder]) }
        try tool("initdb", ["-D", folder + "/data", "-U", "gatehouse", "--auth=trust", "-E", "UTF8", "--no-locale"])
    }

    /// Starts the server and waits until it accepts connections.
    public func start() throws {
        try tool(
            "pg_ctl",
            [
                "-D", folder + "/data", "-l", folder + "/server.log", "-w", "-t", "60", "-o",
                "-h 127.0.0.1 -p \(port) -k \(folder) -c fsync=off -c max_connections=50", "start",
            ])
    }

    /// Stops the server (fast shutdown: open connections are closed).
    public func stop() throws {
        try tool("pg_ctl", ["-D", folder + "/data", "-m", "fast", "-w", "stop"])
    }

    /// Stops the server if it runs and deletes its files.
    public func destroy() {
        try? tool("pg_ctl", ["-D", folder + "/data", "-m", "immediate", "stop"])
        try? FileManager.default.removeItem(atPath: folder)
    }

    private func tool(_ name: String, _ arguments: [String]) throws {
        // PostgreSQL refuses to run as root: as root, run it as the `postgres` user.
        if getuid() == 0 {
            try Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", bin + "/" + name] + arguments)
        } else {
            try Self.run(bin + "/" + name, arguments)
        }
    }

    /// posix_spawn + waitpid on that one pid. Foundation's `Process` is not used here: with
    /// `pg_ctl start` leaving a daemon behind, its exit monitoring was seen never to return.
    private static func run(_ executable: String, _ arguments: [String]) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // A clean signal mask and default handlers: the test runner's threads block some signals,
        // and the server must see pg_ctl's stop signals.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGQUIT, SIGCHLD, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard spawned == 0 else { throw PostgresStorageTestError("could not start \(executable) (errno \(spawned))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        // WIFEXITED/WEXITSTATUS by hand (macros are not imported).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw PostgresStorageTestError("\(executable) \(arguments.first ?? "") failed (wait status \(status))")
        }
    }

    /// A port the kernel just handed out on 127.0.0.1.
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw PostgresStorageTestError("no free loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
