import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// How many connections a listener holds open at most. At its limit a listener stops
/// accepting (`AcceptGate`): new connections wait in the listen backlog until one closes.
///
/// The public listener's default leaves the process descriptors for everything else it opens.
/// A process out of descriptors is worse off than one that makes clients wait: every accept,
/// provider call and store file fails, and libdispatch's thread-pool monitor, which opens
/// `/proc/self/task/<tid>/stat` about once a second while work is queued, stops the whole
/// process (`DISPATCH_CLIENT_CRASH`) when that `open` fails.
public enum ConnectionLimit {
    /// The operations listener's limit: probes and scrapers hold a few connections at a time,
    /// and one that opens many cannot take the public listener's descriptors.
    public static let operations = 64

    /// Descriptors kept for the process itself whatever the settings: the store's files, the
    /// logs, libcurl's multi handle and resolver, libdispatch's reads of `/proc`.
    static let processReserve = 64

    /// Descriptors each processor's event loop holds (its epoll, eventfd and timerfd), rounded up.
    static let perProcessor = 4

    /// The public listener's limit that keeps descriptors for the rest of the process under
    /// `descriptorLimit`: the process's own (`processReserve`, the event loops), the operations
    /// listener's `operations`, the database pool's `databaseConnections`, and for calls to
    /// providers a quarter of what remains, at least the `upstreamConnections` libcurl keeps.
    /// At least 1.
    public static func fitting(
        descriptorLimit: Int, upstreamConnections: Int, databaseConnections: Int, operationsListener: Bool,
        processors: Int = ProcessInfo.processInfo.activeProcessorCount
    ) -> Int {
        let reserved = processReserve + perProcessor * processors + (operationsListener ? operations : 0) + databaseConnections
        let available = descriptorLimit - reserved
        let outbound = max(upstreamConnections, available / 4)
        return max(1, available - outbound)
    }

    /// The soft limit on open descriptors in force (`RLIMIT_NOFILE`), capped at `Int.max`.
    public static var descriptorLimit: Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        // RLIM_INFINITY is the largest rlim_t: clamped to Int.max.
        return Int(clamping: limit.rlim_cur)
    }
}
