import Synchronization

/// Where the listeners count what happens to connections outside any request: the ones
/// `SlowClientDeadlines` cuts, the request heads refused as not HTTP or too large to keep
/// (whose connections close after the answer), the accepts that fail
/// for want of descriptors, and the connections open against each listener's limit. They count
/// into the start-up gate's metrics until the core is assembled, the assembled gateway's
/// after; what happens before either exists is not counted, except the open connections and
/// limits, which the later metrics are given when attached.
final class ListenerMetrics: Sendable {
    private struct State {
        var metrics: ServerMetrics?
        var open: [String: Int] = [:]
        var limits: [String: Int] = [:]
    }
    private let state: Mutex<State>

    /// Counting into `metrics` until `attach(_:)` names others.
    init(metrics: ServerMetrics?) {
        state = Mutex(State(metrics: metrics))
    }

    private var metrics: ServerMetrics? { state.withLock { $0.metrics } }

    /// Counts into `metrics` from now on, starting from the open connections and limits so far.
    func attach(_ metrics: ServerMetrics) {
        // Under the lock, so that a count that changes meanwhile is set after this one.
        state.withLock { state in
            state.metrics = metrics
            for (listener, count) in state.open { metrics.connectionsOpen(listener: listener, count) }
            for (listener, count) in state.limits { metrics.connectionLimit(listener: listener, count) }
        }
    }

    /// Records `listener`'s limit of open connections.
    func limit(listener: String, connections: Int) {
        let metrics = state.withLock { state in
            state.limits[listener] = connections
            return state.metrics
        }
        metrics?.connectionLimit(listener: listener, connections)
    }

    /// Records how many connections `listener` holds open now.
    func connections(listener: String, open: Int) {
        state.withLock { state in
            state.open[listener] = open
            state.metrics?.connectionsOpen(listener: listener, open)
        }
    }

    /// Counts one time `listener` stopped accepting at its limit.
    func limitReached(listener: String) {
        metrics?.connectionLimitReached(listener: listener)
    }

    /// Counts one connection `listener` cut, and why.
    func cut(listener: String, reason: SlowClientDeadlines.Reason) {
        metrics?.connectionCut(listener: listener, reason: reason)
    }

    /// Counts one request head `listener` refused as not HTTP.
    func malformed(listener: String) {
        metrics?.malformedRequest(listener: listener)
    }

    /// Counts one request head `listener` found too large to keep its client's connection open for.
    func largeHead(listener: String) {
        metrics?.largeRequestHead(listener: listener)
    }

    /// Counts one accept of `listener` that failed for want of descriptors or memory.
    func acceptFailed(listener: String) {
        metrics?.acceptFailed(listener: listener)
    }
}
