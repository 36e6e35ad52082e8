import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Temporary folders for tests, all under one folder of the test process
/// (`gatehouse-test-run-<pid>.XXXXXX` in the temporary directory, made by `mkdtemp`: new, the
/// process's own, mode 0700), which is removed when the process exits: stores a test opens and
/// never closes (every conformance test's SQLite file, say) leave nothing behind, run after
/// run. A process killed before it exits leaves its folder; the next test process removes
/// those of processes that no longer run.
public enum TestScratch {
    /// A new empty folder named `<prefix>-<UUID>` under the process's folder.
    public static func folder(_ prefix: String) throws -> String {
        guard let root else { throw TestToolError("no temporary folder of the test process (mkdtemp failed)") }
        let folder = root + "/\(prefix)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        return folder
    }

    /// The process's folder, made (and its removal at exit registered) on first use.
    private static let root: String? = {
        let base = FileManager.default.temporaryDirectory.path
        removeAbandoned(in: base)
        var template = Array((base + "/\(prefix)\(getpid()).XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { return nil }
        let root = String(cString: made)
        removedAtExit.withLock { $0 = root }
        atexit {
            if let root = TestScratch.removedAtExit.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: root) }
        }
        return root
    }()

    /// The folder `atexit` removes (the path as made, whatever `TMPDIR` says by then).
    private static let removedAtExit = Mutex<String?>(nil)

    /// The name of a process's folder, before its pid.
    public static let prefix = "gatehouse-test-run-"

    /// Removes from `base` the folders of test processes that are gone (`kill(pid, 0)` finds
    /// no process; one of another user's answers `EPERM` and stays).
    public static func removeAbandoned(in base: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? [] where name.hasPrefix(prefix) {
            let digits = name.dropFirst(prefix.count).prefix { $0.isNumber }
            guard let pid = pid_t(digits), pid != getpid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH {
                try? FileManager.default.removeItem(atPath: base + "/" + name)
            }
        }
    }
}
