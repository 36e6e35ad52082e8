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
    private var descriptor: CInt = -1

    /// Holds the reserve (opening it if given back) and answers whether one more descriptor
    /// is free beside it. When none is, the reserve is given back at once and the answer is
    /// `false`: the descriptor is the process's again.
    mutating func holdWithOneToSpare() -> Bool {
        if descriptor < 0 { descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else { return false }
        // A duplicate takes a descriptor under the same limit as a socket would.
        let probe = fcntl(descriptor, F_DUPFD_CLOEXEC, CInt(0))
        guard probe >= 0 else {
            release()
            return false
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
}
