import Foundation
import Synchronization

/// Where the core reads the time: stored timestamps, lifetimes of flows, sessions, tokens and
/// cache entries, breaker cool-downs. Injected, so tests move time forward instead of sleeping.
public protocol GatehouseClock: Sendable {
    /// The current time.
    func now() -> Date
}

/// The machine's clock.
public struct SystemClock: GatehouseClock {
    /// The machine's clock.
    public init() {}

    /// `Date()`.
    public func now() -> Date { Date() }
}

/// The machine's clock plus an offset that tests move forward: time keeps flowing, and a test
/// that needs a lifetime to pass advances the clock past it instead of sleeping.
public final class OffsetClock: GatehouseClock {
    private let offset = Mutex<TimeInterval>(0)

    /// No offset yet.
    public init() {}

    /// The machine's time plus the offset.
    public func now() -> Date { Date().addingTimeInterval(offset.withLock { $0 }) }

    /// Moves the clock `seconds` forward.
    public func advance(by seconds: TimeInterval) {
        offset.withLock { $0 += seconds }
    }
}

/// A clock that stands still until moved: what a test reads from it depends only on how far
/// it advanced the clock, never on how slowly a loaded machine ran the test in between.
public final class StoppedClock: GatehouseClock {
    private let time: Mutex<Date>

    /// Stopped at `start` (the machine's time when created, by default).
    public init(at start: Date = Date()) {
        time = Mutex(start)
    }

    /// Where the clock stands.
    public func now() -> Date { time.withLock { $0 } }

    /// Moves the clock `seconds` forward.
    public func advance(by seconds: TimeInterval) {
        time.withLock { $0 = $0.addingTimeInterval(seconds) }
    }
}
