/// A yes-or-no check shared by its callers: evaluated by one caller at a time (the others
/// wait for that evaluation) and kept for `lifetime`. The public port's `/readyz` answers
/// anyone, without a credential or a rate limit; its verdict pings the database, whose pool
/// serves everyone's requests, so requests to it must not each cost a ping.
actor SharedVerdict {
    private let lifetime: Duration
    private let now: @Sendable () -> ContinuousClock.Instant
    private var last: (at: ContinuousClock.Instant, verdict: Bool)?
    private var running: Task<Bool, Never>?

    /// A verdict kept for `lifetime` after each evaluation; `now` is injectable for tests.
    init(lifetime: Duration = .seconds(1), now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.lifetime = lifetime
        self.now = now
    }

    /// The kept verdict while it is fresh; otherwise the one `evaluate` gives, evaluated once
    /// for every caller meanwhile.
    func verdict(_ evaluate: @escaping @Sendable () async -> Bool) async -> Bool {
        if let last, now() - last.at < lifetime { return last.verdict }
        if let running { return await running.value }
        let task = Task { await evaluate() }
        running = task
        let verdict = await task.value
        running = nil
        last = (now(), verdict)
        return verdict
    }
}
