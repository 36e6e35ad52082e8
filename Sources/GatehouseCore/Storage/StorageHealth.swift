import Foundation
import Synchronization

/// The last time the store refused work for lack of a resource (a full disk, no memory, no
/// connection slots), for readiness: reads may still work, so a ping alone would not show it.
public final class StorageHealth: Sendable {
    /// How long a refusal is reported after it was last seen.
    public let memory: TimeInterval
    private let clock: any GatehouseClock
    private let last = Mutex<(condition: String, at: Date)?>(nil)

    /// A record that reports a refusal for `memory` seconds.
    public init(memory: TimeInterval = 60, clock: any GatehouseClock) {
        self.memory = memory
        self.clock = clock
    }

    /// Notes a refusal.
    public func recordExhausted(_ condition: String) {
        let now = clock.now()
        last.withLock { $0 = (condition, now) }
    }

    /// The condition of the last refusal and how many seconds ago it was, if within `memory`.
    public var recentProblem: (condition: String, secondsAgo: Int)? {
        let now = clock.now()
        guard let last = last.withLock({ $0 }), now.timeIntervalSince(last.at) < memory else { return nil }
        return (last.condition, Int(now.timeIntervalSince(last.at)))
    }
}
