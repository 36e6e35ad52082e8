import Testing

@testable import GatehouseCore

/// When the webhook rounds read the backlog gauges (a count of every pending entry).
@Suite("Backlog readings")
struct BacklogReadingsTests {
    @Test("after a round that changed the outbox, at most once per interval; a change inside the interval is read by the first round after it")
    func atMostOncePerInterval() {
        var readings = BacklogReadings(interval: .seconds(5))
        let start = ContinuousClock.now
        /// Whether a round ending `seconds` after the start reads the gauges.
        func reads(_ seconds: Double, changed: Bool) -> Bool {
            readings.shouldRead(at: start + .milliseconds(Int(seconds * 1000)), changed: changed)
        }
        // A round that changed nothing reads nothing, not even the first time.
        let idle = reads(0, changed: false)
        let first = reads(0.1, changed: true)
        #expect(!idle && first)
        // A busy endpoint's rounds inside the interval: none reads.
        let inside = (1...40).map { reads(0.1 + Double($0) * 0.1, changed: true) }
        #expect(!inside.contains(true))
        // The first round once the interval is over reads the change made inside it, even a
        // round that itself changed nothing; then nothing is left to read.
        let after = reads(5.1, changed: false)
        let nothingLeft = reads(11, changed: false)
        #expect(after && !nothingLeft)
        // A failed reading is read again by the next round due.
        let again = reads(11.1, changed: true)
        readings.failed()
        let tooSoon = reads(12, changed: false)
        let due = reads(16.2, changed: false)
        #expect(again && !tooSoon && due)
    }
}
