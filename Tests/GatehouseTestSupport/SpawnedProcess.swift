import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, for the tests that run programs (the
/// `gatehouse` executable, nghttpd, oidc-provider-mock, Python).
///
/// Not Foundation's `Process`: on Linux its `run()` intermittently crashes the whole test
/// process with an over-read in `findMaximumOpenFromProcSelfFD()` (swift-corelibs-foundation
/// pull request #5472; seen here once in a fresh-clone run, in `memmove` under `Process.run`),
/// and its exit monitoring was seen never to return for a tool that leaves a daemon behind.
/// The child gets an empty signal mask and default handlers: the test runner's threads block
/// some signals, and a server started from here must still stop on its signals.
public final class SpawnedProcess: Sendable {
    /// Where the child's standard output goes.
    public enum Output: Sendable {
        /// `/dev/null`.
        case discard
        /// Appended to this file, standard error too (the gateway logs there).
        case file(String)
        /// A pipe the test reads with `readOutput()` (standard error goes there too).
        case pipe
    }

    /// The child's process id.
    public let pid: pid_t
    private let outputDescriptor: Int32?
    private let status = Mutex<Int32?>(nil)

    private init(pid: pid_t, outputDescriptor: Int32?) {
        self.pid = pid
        self.outputDescriptor = outputDescriptor
    }

    /// Starts `executable` with `arguments`; `environment` replaces the test process's own
    /// when given.
    public static func start(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, output: Output = .discard
    ) throws -> SpawnedProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        var pipeEnds: [Int32] = [-1, -1]
        switch output {
        case .discard:
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        case .file(let path):
            posix_spawn_file_actions_addopen(&actions, 1, path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        case .pipe:
            // A socket pair, created close-on-exec atomically: no other child spawned meanwhile
            // inherits the write end (which would hold `readOutput()` until that child exits).
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pipeEnds) == 0 else {
                throw TestToolError("no pipe for \(executable) (errno \(errno))")
            }
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 2)
        }
        // The child keeps only 0–2: no socket of another test (a client connection whose close
        // a server waits to see, a listening port) lives on in it.
        // (glibc 2.34+; looked up at run time because Swift's Glibc module does not import it.)
        if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, 3) }
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
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { variables.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, variables)
        if pipeEnds[1] >= 0 { close(pipeEnds[1]) }
        guard spawned == 0 else {
            if pipeEnds[0] >= 0 { close(pipeEnds[0]) }
            throw TestToolError("could not start \(executable) (errno \(spawned))")
        }
        return SpawnedProcess(pid: pid, outputDescriptor: pipeEnds[0] >= 0 ? pipeEnds[0] : nil)
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: AddCloseFrom.self)
    }

    /// Everything the child writes to a `.pipe` output, until it closes it (usually at exit).
    public func readOutput() -> String {
        guard let descriptor = outputDescriptor else { return "" }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count > 0 {
                bytes += buffer[0..<count]
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Waits for the child and returns its wait status (see `exitCode`, `killedBySignal`).
    @discardableResult
    public func wait() -> Int32 {
        if let known = status.withLock({ $0 }) { return known }
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) == -1 && errno == EINTR {}
        status.withLock { $0 = raw }
        if let outputDescriptor { close(outputDescriptor) }
        return raw
    }

    /// `wait()` on a thread of its own, for async code: a blocking wait on Swift's cooperative
    /// pool (one thread per core, two on the CI machine) holds one of its threads, and two at
    /// once froze every server of every other test in the process (seen as 10 s upstream
    /// timeouts in unrelated tests while PostgreSQL clusters started).
    public func exited() async -> Int32 {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.wait()) }.start()
        }
    }

    /// `readOutput()` on a thread of its own (see `exited()`).
    public func output() async -> String {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.readOutput()) }.start()
        }
    }

    /// Whether the child has not exited yet.
    public var isRunning: Bool {
        guard status.withLock({ $0 }) == nil else { return false }
        var raw: Int32 = 0
        let result = waitpid(pid, &raw, WNOHANG)
        if result == pid {
            status.withLock { $0 = raw }
            return false
        }
        return result == 0
    }

    /// Kills the process if it still runs after `limit`, so that a command a regression keeps
    /// running (a server that should have refused to start) fails its test instead of holding
    /// the run; whoever awaits `exited()` sees it killed. Cancel the task once the process
    /// is known to have ended.
    public func watchdog(after limit: Duration) -> Task<Void, Never> {
        Task { [self] in
            guard (try? await Task.sleep(for: limit)) != nil else { return }
            if isRunning { kill(pid, SIGKILL) }
        }
    }

    /// Sends `signal` (SIGKILL by default) if the child still runs, then waits for it.
    public func stop(signal: Int32 = SIGKILL) {
        if isRunning { kill(pid, signal) }
        wait()
    }

    /// The exit code of a wait status, `nil` when the child was killed by a signal
    /// (WIFEXITED/WEXITSTATUS by hand: the C macros are not imported).
    public static func exitCode(_ status: Int32) -> Int32? { status & 0x7f == 0 ? (status >> 8) & 0xff : nil }

    /// Whether a wait status says a signal ended the child.
    public static func killedBySignal(_ status: Int32) -> Bool { status & 0x7f != 0 && status & 0x7f != 0x7f }
}
