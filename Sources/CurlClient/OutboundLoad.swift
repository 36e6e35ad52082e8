import Synchronization

/// What the client is doing now: transfers in flight and waiting, and how many it refused.
public struct OutboundLoad: Sendable, Equatable {
    /// Transfers started and not ended.
    public var inFlight: Int
    /// Transfers waiting for one in flight to end.
    public var waiting: Int
    /// Requests refused as `overloaded` or `ownerOverloaded` since the client started.
    public var refused: Int
}

/// The driver thread's counts, read from any thread (a metrics scrape, a test).
final class LoadCounters: Sendable {
    private let inFlight = Atomic<Int>(0)
    private let waiting = Atomic<Int>(0)
    private let refused = Atomic<Int>(0)

    /// The counts now; each is exact, the three together a moment apart at most.
    var snapshot: OutboundLoad {
        OutboundLoad(
            inFlight: inFlight.load(ordering: .relaxed), waiting: waiting.load(ordering: .relaxed),
            refused: refused.load(ordering: .relaxed))
    }

    /// Publishes the driver's counts; only the driver thread calls this.
    func publish(inFlight: Int, waiting: Int) {
        self.inFlight.store(inFlight, ordering: .relaxed)
        self.waiting.store(waiting, ordering: .relaxed)
    }

    /// Counts one refusal.
    func countRefusal() {
        refused.add(1, ordering: .relaxed)
    }
}
