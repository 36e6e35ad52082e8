/// When the webhook rounds read the backlog gauges: after a round that changed the outbox, at
/// most once per `interval`. The backlog's count reads every pending entry (all endpoints',
/// every instance's), so a busy endpoint's rounds must not read it each time; a change within
/// the interval is read by the first round after it (every worker runs one each poll interval).
struct BacklogReadings: Sendable {
    /// The least time between two readings.
    let interval: Duration
    /// When the gauges were last read.
    private var last: ContinuousClock.Instant?
    /// Whether a round changed the outbox since.
    private var stale = false

    /// Readings at most once per `interval`.
    init(interval: Duration) {
        self.interval = interval
    }

    /// Whether a round ending at `now`, which `changed` the outbox or not, reads the gauges;
    /// when it does, the reading counts as made.
    mutating func shouldRead(at now: ContinuousClock.Instant, changed: Bool) -> Bool {
        if changed { stale = true }
        guard stale, last.map({ now - $0 >= interval }) ?? true else { return false }
        (last, stale) = (now, false)
        return true
    }

    /// A reading that failed: the next round due reads again.
    mutating func failed() {
        stale = true
    }
}
