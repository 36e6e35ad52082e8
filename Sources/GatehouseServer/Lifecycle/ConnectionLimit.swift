import Foundation
import NIOCore

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
/// process (`DISPATCH_CLIENT_CRASH`) when that `open` fails. Under a memory limit (a
/// container's cgroup) the default also stays within memory: a container given a million
/// descriptors would otherwise be killed for its memory long before they ran out.
public enum ConnectionLimit {
    /// The operations listener's limit: probes and scrapers hold a few connections at a time,
    /// and one that opens many cannot take the public listener's descriptors.
    public static let operations = 64

    /// Descriptors kept for the process itself whatever the settings: the store's files, the
    /// logs, libcurl's multi handle and resolver, libdispatch's reads of `/proc`.
    static let processReserve = 64

    /// Descriptors each event loop holds (its epoll, eventfd and timerfd), rounded up.
    static let perProcessor = 4

    /// Memory kept for the process itself under a memory limit (its heap, caches and stacks):
    /// this much, or half a smaller limit.
    static let memoryReserve = 64 << 20

    /// Memory counted for each connection under a memory limit: an idle one holds about 22 KB
    /// after a short request (the Performance article), and a client can make it keep up to
    /// about 45 KB: a head of up to 8 KB (a larger one closes the connection after its answer,
    /// `HTTP1Semantics`) and a receive buffer grown to 16 KB by a body
    /// (`GatewayHTTP1Channel.receiveBuffers`).
    static let memoryPerConnection = 48 << 10

    /// Memory counted for each call to a provider in flight under a memory limit: a
    /// passthrough call holds about 54 KB beside its connection (the Performance article's
    /// 1,000 calls in flight).
    static let memoryPerCall = 64 << 10

    /// The processors the event loops run on, as NIO counts them (a cgroup's CPU quota included).
    public static var processors: Int { System.coreCount }

    /// Above any real setting: inputs are clamped to it, so that the sums cannot overflow.
    private static let ceiling = 1 << 40

    /// The public listener's limit that keeps descriptors for the rest of the process under
    /// `descriptorLimit`: the process's own (`processReserve`, `perProcessor` for each event
    /// loop), the operations listener's `operations`, the database pool's
    /// `databaseConnections`, and for calls to providers a quarter of what remains, at least
    /// the `upstreamConnections` libcurl keeps. Under a `memoryLimit` in bytes, also no more
    /// than `memoryPerConnection` each fit in the connections' share of it (`memoryShares`,
    /// `memoryKept` being the configured caches). At least 1.
    public static func fitting(
        descriptorLimit: Int, upstreamConnections: Int, databaseConnections: Int, operationsListener: Bool, memoryLimit: Int? = nil,
        memoryKept: Int = 0, processors: Int = processors
    ) -> Int {
        let shares = descriptorShares(
            descriptorLimit: descriptorLimit, upstreamConnections: upstreamConnections, databaseConnections: databaseConnections,
            operationsListener: operationsListener, processors: processors)
        let byDescriptors = shares.available - shares.outbound
        let byMemory = memoryLimit.map { memoryShares(limit: $0, kept: memoryKept).connections / memoryPerConnection } ?? .max
        return max(1, min(byDescriptors, byMemory))
    }

    /// Calls to providers (and hooks and webhooks) in flight at once that fit in the
    /// descriptors `fitting` keeps for them: half of them, since a call holds a second
    /// descriptor while it connects (IPv4 and IPv6 tried together) or resolves a name. Under a
    /// `memoryLimit`, also no more than `memoryPerCall` each fit in the calls' share of it
    /// (`memoryShares`). At least `minimumUpstreamCalls`.
    public static func upstreamCalls(
        descriptorLimit: Int, upstreamConnections: Int, databaseConnections: Int, operationsListener: Bool, memoryLimit: Int? = nil,
        memoryKept: Int = 0, processors: Int = processors
    ) -> Int {
        let shares = descriptorShares(
            descriptorLimit: descriptorLimit, upstreamConnections: upstreamConnections, databaseConnections: databaseConnections,
            operationsListener: operationsListener, processors: processors)
        let byMemory = memoryLimit.map { memoryShares(limit: $0, kept: memoryKept).calls / memoryPerCall } ?? .max
        return max(minimumUpstreamCalls, min(shares.outbound / 2, byMemory))
    }

    /// What a memory `limit` leaves for connections and for calls in flight once the process
    /// has `memoryReserve` (half of a limit under twice that) and the caches `kept` (the photo
    /// cache's budget) their part: a quarter for calls, as with descriptors, the rest for
    /// connections. The caches count for at most half of what the reserve leaves (a small
    /// container's reserve holds part of them: a 32 MiB photo cache fills only as photos are
    /// asked for), so a default cache never leaves a small container a single connection.
    /// Without this, a container given a million descriptors would admit calls and
    /// connections whose memory it does not have.
    static func memoryShares(limit: Int, kept: Int) -> (connections: Int, calls: Int) {
        let available = clamped(limit) - min(memoryReserve, clamped(limit) / 2)
        let budget = available - min(clamped(kept), available / 2)
        return (budget - budget / 4, budget / 4)
    }

    /// One user's share of `calls` by default: a sixteenth, at least 4 (or all of fewer).
    /// Sixteen users' passthrough calls at least are needed to take every slot.
    public static func upstreamCallsPerUser(of calls: Int) -> Int {
        max(min(4, calls), calls / 16)
    }

    /// The slots of `calls` kept for sign-ins, refreshes, key fetches and hooks by default: an
    /// eighth, at least 1 (none of a single slot). Passthrough calls and photos run in the rest,
    /// so those stalling cannot make a sign-in wait.
    public static func upstreamCallsReserved(of calls: Int) -> Int {
        calls < 2 ? 0 : max(1, calls / 8)
    }

    /// The `.high` calls of one provider (or of the hooks) in flight and waiting, of `calls`:
    /// half, at least 1. A provider whose token endpoint hangs then holds half of the slots at
    /// most, and every other provider's sign-ins and refreshes still find the rest.
    public static func upstreamCallsPerProvider(of calls: Int) -> Int {
        max(1, calls / 2)
    }

    /// The fewest calls in flight a default allows, however few descriptors there are: fewer
    /// would make every burst of sign-ins wait.
    public static let minimumUpstreamCalls = 16

    /// What `descriptorLimit` leaves once the process, its event loops, the operations
    /// listener and the database pool have theirs (`available`), and the part of that kept
    /// for outbound calls (`outbound`): a quarter, at least `upstreamConnections`.
    private static func descriptorShares(
        descriptorLimit: Int, upstreamConnections: Int, databaseConnections: Int, operationsListener: Bool, processors: Int
    ) -> (available: Int, outbound: Int) {
        let reserved =
            processReserve + perProcessor * clamped(processors) + (operationsListener ? operations : 0) + clamped(databaseConnections)
        let available = clamped(descriptorLimit) - reserved
        return (available, max(clamped(upstreamConnections), available / 4))
    }

    /// `value` within 0 and `ceiling`.
    private static func clamped(_ value: Int) -> Int { min(max(value, 0), ceiling) }

    /// The soft limit on open descriptors in force (`RLIMIT_NOFILE`), capped at `Int.max`.
    public static var descriptorLimit: Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        // RLIM_INFINITY is the largest rlim_t: clamped to Int.max.
        return Int(clamping: limit.rlim_cur)
    }

    /// The memory limit of the process's cgroup in bytes: the lowest `memory.max` (cgroup v2)
    /// or `memory.limit_in_bytes` (v1) of its cgroup and those above it, `nil` when none sets
    /// one or none can be read. `root` is where the cgroup hierarchies are mounted,
    /// `membership` the process's `/proc/self/cgroup`.
    public static func memoryLimit(root: String = "/sys/fs/cgroup", membership: String = "/proc/self/cgroup") -> Int? {
        // "0::/system.slice/gatehouse.service" (v2) or "4:memory:/docker/…" (v1): the path
        // below the mount. In a container the path may be the host's while the mount is the
        // container's own cgroup, so every folder from the mount down is read.
        let lines = ((try? String(contentsOfFile: membership, encoding: .utf8)) ?? "").split(separator: "\n")
        func path(_ prefix: (Substring) -> Bool) -> [String] {
            // The path is the third field, and may hold colons itself.
            let fields = lines.first { prefix($0) }?.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            return fields.flatMap { $0.count == 3 ? $0[2].split(separator: "/").map(String.init) : nil } ?? []
        }
        func limits(under mount: String, path: [String], file: String) -> [Int] {
            (0...path.count).compactMap { depth in
                let folder = ([mount] + path.prefix(depth)).joined(separator: "/")
                let text = try? String(contentsOfFile: folder + "/" + file, encoding: .utf8)
                // v2 writes "max" for none, v1 a number near Int64.max.
                return text.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }.flatMap { $0 < 1 << 60 ? $0 : nil }
            }
        }
        let v2 = limits(under: root, path: path { $0.hasPrefix("0::") }, file: "memory.max")
        let v1 = limits(
            under: root + "/memory",
            path: path { $0.split(separator: ":", maxSplits: 2).dropFirst().first?.split(separator: ",").contains("memory") == true },
            file: "memory.limit_in_bytes")
        return (v2 + v1).min()
    }
}
