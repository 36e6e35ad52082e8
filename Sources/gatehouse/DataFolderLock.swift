import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An exclusive lock on the SQLite data folder, held by `serve` and `demo` for the life of the
/// process. Each process caches accounts and sessions, and on SQLite no change feed tells one
/// process what another wrote: a second server on the same folder would go on accepting a
/// session the first one signed out. So the second one stops at start instead. One-shot
/// commands (`keys`, `check`, `migrate`) take no lock: they are meant to run beside a server.
enum DataFolderLock {
    /// The descriptors of the locks held: never closed, since closing one releases its lock.
    private static let held = Mutex<[Int32]>([])

    /// Another process holds the folder.
    struct InUse: Error, CustomStringConvertible {
        /// The folder as given.
        let folder: String
        /// The process id written by the holder, when it could be read.
        let holder: String?

        /// The message the command prints.
        var description: String {
            let who = holder.map { "another Gatehouse process (pid \($0))" } ?? "another Gatehouse process"
            return
                "The data folder \(folder) is in use by \(who). Two servers on one SQLite folder would disagree about sessions and sign-outs; stop the other one, or give this one its own --data-dir (GATEHOUSE_DATA_DIR)."
        }
    }

    /// The lock file could not be opened.
    struct Unusable: Error, CustomStringConvertible {
        /// What failed, with the path.
        let description: String
    }

    /// Takes the folder's lock (`gatehouse.lock` inside it, holding this process's id) or throws
    /// `InUse` at once, without waiting.
    static func acquire(folder: String) throws {
        let path = (folder as NSString).appendingPathComponent("gatehouse.lock")
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw Unusable(description: "Cannot open \(path): \(String(cString: strerror(errno))).")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            close(descriptor)
            throw InUse(folder: folder, holder: holder?.isEmpty == false && holder!.allSatisfy(\.isNumber) ? holder : nil)
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        held.withLock { $0.append(descriptor) }
    }
}
