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
    private let wakeUps = Atomic<Int>(0)
    private let watchChanges = Atomic<Int>(0)

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

    /// How many times the driver thread has woken from its wait: about once a second while
    /// nothing happens, so a driver woken again and again by a socket nobody reads shows here.
    var wakeUpCount: Int { wakeUps.load(ordering: .relaxed) }

    /// Counts one wake-up; only the driver thread calls this.
    func countWakeUp() {
        wakeUps.add(1, ordering: .relaxed)
    }

    /// How many changes the driver has made to its epoll set for libcurl's sockets
    /// (`SocketRegistrations`: a connection reused by transfer after transfer makes none).
    var watchChangeCount: Int { watchChanges.load(ordering: .relaxed) }

    /// Counts one change to the epoll set; only the driver thread calls this.
    func countWatchChange() {
        watchChanges.add(1, ordering: .relaxed)
    }
}
