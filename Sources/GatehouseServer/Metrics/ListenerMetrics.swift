import Synchronization

/// Where the listeners count what happens to connections outside any request: the ones
/// `SlowClientDeadlines` cuts, the request heads refused as not HTTP and the accepts that
/// fail for want of descriptors. They count into the start-up gate's metrics until the core
/// is assembled, the assembled gateway's after; what happens before either exists is not
/// counted.
final class ListenerMetrics: Sendable {
    private let metrics: Mutex<ServerMetrics?>

    /// Counting into `metrics` until `attach(_:)` names others.
    init(metrics: ServerMetrics?) {
        self.metrics = Mutex(metrics)
    }

    /// Counts into `metrics` from now on.
    func attach(_ metrics: ServerMetrics) {
        self.metrics.withLock { $0 = metrics }
    }

    /// Counts one connection `listener` cut, and why.
    func cut(listener: String, reason: SlowClientDeadlines.Reason) {
        metrics.withLock { $0 }?.connectionCut(listener: listener, reason: reason)
    }

    /// Counts one request head `listener` refused as not HTTP.
    func malformed(listener: String) {
        metrics.withLock { $0 }?.malformedRequest(listener: listener)
    }

    /// Counts one accept of `listener` that failed for want of descriptors or memory.
    func acceptFailed(listener: String) {
        metrics.withLock { $0 }?.acceptFailed(listener: listener)
    }
}
