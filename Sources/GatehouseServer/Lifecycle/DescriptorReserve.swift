#if canImport(Glibc)
    import Glibc
#endif

/// One descriptor a listener holds back while descriptors are plentiful and gives back while
/// it finds none, so that the rest of the process still finds one.
///
/// A process out of descriptors does not merely fail what it opens: the Swift runtime's thread
/// pool (libdispatch) opens `/proc/<tid>/stat` about once a second while work waits, and stops
/// the whole process (`SIGILL`) when that open fails. A client holding connections up to the
/// descriptor limit would otherwise stop the gateway. With the reserve given back, the listener
/// accepts again only once the reserve is held anew and one more descriptor is free beside it,
/// for the connection it takes next.
///
/// Used on one listener's event loop only.
struct DescriptorReserve {
    private let path: String
    private var descriptor: CInt = -1

    /// A reserve opening `path`, not yet held.
    init(path: String = "/dev/null") {
        self.path = path
    }

    /// Holds the reserve (opening it if given back) and answers whether one more descriptor
    /// is free beside it. When none is, the reserve is given back at once and the answer is
    /// `false`: the descriptor is the process's again. Any other failure (no `/dev/null` in a
    /// bare container) answers `true` without a reserve, so that a listener never stops
    /// accepting for want of a file.
    mutating func holdWithOneToSpare() -> Bool {
        if descriptor < 0 {
            descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return !Self.outOfDescriptors(errno) }
        }
        // A duplicate takes a descriptor under the same limit as a socket would.
        let probe = fcntl(descriptor, F_DUPFD_CLOEXEC, CInt(0))
        guard probe >= 0 else {
            let error = errno
            release()
            return !Self.outOfDescriptors(error)
        }
        close(probe)
        return true
    }

    /// Gives the reserve back to the process, if held.
    mutating func release() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    /// Whether `error` says the process (`EMFILE`) or the system (`ENFILE`) has no descriptor
    /// left.
    private static func outOfDescriptors(_ error: CInt) -> Bool {
        error == EMFILE || error == ENFILE
    }
}
