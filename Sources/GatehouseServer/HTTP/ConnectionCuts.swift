import Synchronization

/// Where the listeners count the connections `SlowClientDeadlines` cuts: the metrics of the
/// start-up gate until the core is assembled, the assembled gateway's after. A cut before
/// either exists is not counted.
final class ConnectionCuts: Sendable {
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
    func record(listener: String, reason: SlowClientDeadlines.Reason) {
        metrics.withLock { $0 }?.connectionCut(listener: listener, reason: reason)
    }
}
