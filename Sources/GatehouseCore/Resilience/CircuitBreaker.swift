import Foundation

/// When a provider's circuit breaker opens and for how long.
public struct CircuitBreakerSettings: Sendable, Equatable {
    /// Consecutive failures that open the breaker (0 turns breaking off).
    public var failureThreshold: Int
    /// How long an open breaker refuses calls before one probe is let through.
    public var openDuration: TimeInterval

    /// 5 failures, 30 seconds.
    public init(failureThreshold: Int = 5, openDuration: TimeInterval = 30) {
        self.failureThreshold = failureThreshold
        self.openDuration = openDuration
    }
}

/// One provider's circuit breaker: after `failureThreshold` consecutive failures the gateway
/// stops calling the provider for `openDuration` and answers at once (stale data where the
/// caches have some), then lets a single probe through; its outcome closes or reopens it.
///
/// Only failures of the provider itself count (`upstream-unavailable`: 5xx, timeouts,
/// unreachable). A 4xx, a rate limit or a dead grant is the provider answering.
actor CircuitBreaker {
    /// The breaker's state, as `/metrics` reports it.
    enum State: String, Sendable {
        case closed
        case halfOpen = "half-open"
        case open
    }

    /// How a call ended, for the breaker.
    enum Outcome {
        /// The provider answered (whatever it said).
        case answered
        /// The provider failed (`upstream-unavailable`).
        case failed
        /// The call tells nothing about the provider (the caller went away).
        case unknown
        /// The caller's own request failed before the provider could answer (its body stalled):
        /// nothing is learned of the provider, and a probe made so is spent for its caller, who
        /// probes again only after an open period (the next probe is another caller's).
        case callerFailed
    }

    private let providerId: String
    private let settings: CircuitBreakerSettings
    private let metrics: GatehouseMetrics
    private(set) var state = State.closed
    private var consecutiveFailures = 0
    private var openedAt = Date.distantPast
    private var probing = false
    /// How many different callers must have failed among the consecutive failures before the
    /// breaker opens (1: any failures do).
    private let distinctCallers: Int
    /// The callers among the current run of consecutive failures (at most `distinctCallers`).
    private var failingCallers: Set<String> = []
    /// The callers whose probes failed since the breaker last opened: with `distinctCallers`
    /// above 1, it reopens only once that many probed and failed, and none of them probes again
    /// meanwhile (otherwise one caller, probing at each open period's end with a call it knows
    /// fails, would hold it open for everyone).
    private var failedProbers: Set<String> = []
    /// When the last probe failed: a caller whose probe failed may probe again one open period
    /// later (on a quiet deployment nobody else may come).
    private var lastProbeFailedAt = Date.distantPast
    /// The callers whose probes failed by their own fault (`callerFailed`) since the breaker
    /// last opened, and when the last did: barred from probing as `failedProbers` are, without
    /// counting toward reopening it (at most `maximumStalledProbers`; past that, any caller may).
    private var stalledProbers: Set<String> = []
    private var lastProbeStalledAt = Date.distantPast
    /// The most callers `stalledProbers` keeps.
    private let maximumStalledProbers = 1000

    /// A closed breaker for `providerId`; with `distinctCallers` above 1, failures open it only
    /// once that many different callers met them (see `record(_:probe:caller:now:)`).
    init(providerId: String, settings: CircuitBreakerSettings, metrics: GatehouseMetrics, distinctCallers: Int = 1) {
        self.providerId = providerId
        self.distinctCallers = max(1, distinctCallers)
        self.settings = settings
        self.metrics = metrics
        metrics.circuitState(providerId: providerId, state: .closed)
    }

    /// Admits a call by `caller` or throws `upstream-unavailable` (temporarily, with the
    /// seconds to wait) while open. Returns whether the admitted call is the half-open probe.
    func admit(now: Date = Date(), caller: String? = nil) throws -> Bool {
        switch state {
        case .closed:
            return false
        case .open where now.timeIntervalSince(openedAt) >= settings.openDuration:
            move(to: .halfOpen)
            probing = true
            return true
        case .halfOpen where !probing && !isBarred(caller, now: now):
            // The last probe failed for its caller alone: the next other caller probes, or the
            // same one after an open period.
            probing = true
            return true
        case .open, .halfOpen:
            // Open: until the open period ends. Half-open: a moment, for the probe under way,
            // or, to a caller whose own probe failed, until it may probe again.
            let waitsFrom = state == .open ? openedAt : barredSince(caller, now: now)
            // At least a second, at most a day (an open period set longer, or a clock that
            // stepped back, must not trap the conversion or promise more).
            let retryAfter = waitsFrom.map { Int(min(max(1, (settings.openDuration - now.timeIntervalSince($0)).rounded(.up)), 86_400)) } ?? 1
            throw GatehouseError(
                code: .upstreamUnavailable, situation: .temporarilyUnavailable,
                detail: "\(providerId) has been failing; the gateway is not calling it for now.",
                extensions: ["providerId": providerId], retryAfter: retryAfter)
        }
    }

    /// When the probe of `caller` that bars it from probing now ended (a failed probe, or one
    /// that failed by its own fault), or `nil` when it may probe.
    private func barredSince(_ caller: String?, now: Date) -> Date? {
        guard let caller else { return nil }
        let bars = [failedProbers.contains(caller) ? lastProbeFailedAt : nil, stalledProbers.contains(caller) ? lastProbeStalledAt : nil]
        return bars.compactMap { $0 }.filter { now.timeIntervalSince($0) < settings.openDuration }.max()
    }

    /// Whether `caller` may not probe now (`barredSince`).
    private func isBarred(_ caller: String?, now: Date) -> Bool { barredSince(caller, now: now) != nil }

    /// Records how an admitted call ended. `caller` names who made the call (a user or a
    /// service key): a breaker shared by many callers must not be opened by one of them alone,
    /// whatever that one sends or asks for, so its failures count toward opening only together
    /// with another caller's.
    func record(_ outcome: Outcome, probe: Bool, caller: String? = nil, now: Date = Date()) {
        if probe { probing = false }
        switch outcome {
        case .answered:
            consecutiveFailures = 0
            failingCallers.removeAll()
            failedProbers.removeAll()
            stalledProbers.removeAll()
            if state != .closed { move(to: .closed) }
        case .failed:
            consecutiveFailures += 1
            if let caller, failingCallers.count < distinctCallers { failingCallers.insert(caller) }
            let enoughCallers = distinctCallers == 1 || failingCallers.count >= distinctCallers
            let tripped = settings.failureThreshold > 0 && consecutiveFailures >= settings.failureThreshold && enoughCallers
            if probe, state == .halfOpen, distinctCallers > 1, let caller {
                failedProbers.insert(caller)
                lastProbeFailedAt = now
                guard failedProbers.count >= distinctCallers else { return }
            }
            if state == .halfOpen || (state == .closed && tripped) {
                openedAt = now
                failedProbers.removeAll()
                stalledProbers.removeAll()
                move(to: .open)
            }
        case .unknown:
            // An abandoned probe leaves the breaker open again, so the next caller probes.
            if probe, state == .halfOpen {
                openedAt = now.addingTimeInterval(-settings.openDuration)
                move(to: .open)
            }
        case .callerFailed:
            // Half-open still: the next other caller probes; this one waits an open period, so
            // that a caller stalling its uploads cannot hold every probe.
            guard probe, state == .halfOpen, let caller else { return }
            if stalledProbers.count >= maximumStalledProbers { stalledProbers.removeAll() }
            stalledProbers.insert(caller)
            lastProbeStalledAt = now
        }
    }

    private func move(to new: State) {
        state = new
        metrics.circuitTransition(providerId: providerId, to: new)
    }
}

/// The breakers of every configured provider, shared by all users: failures open one only
/// when at least two different users met them (`CircuitBreaker`'s `distinctCallers`), so one
/// user whose own calls fail (an account the provider cannot serve, a photo it errs on)
/// never stops the provider for everyone.
struct ProviderCircuits: Sendable {
    private let breakers: [String: CircuitBreaker]
    private let clock: any GatehouseClock

    /// A closed breaker for each provider.
    init(providerIds: [String], settings: CircuitBreakerSettings, metrics: GatehouseMetrics, clock: any GatehouseClock = SystemClock()) {
        self.clock = clock
        breakers = Dictionary(
            uniqueKeysWithValues: providerIds.map {
                ($0, CircuitBreaker(providerId: $0, settings: settings, metrics: metrics, distinctCallers: 2))
            })
    }

    /// The breaker of one provider (for tests and `/readyz`).
    func breaker(_ providerId: String) -> CircuitBreaker? { breakers[providerId] }

    /// Runs `call`, made for the user `caller`, through the provider's breaker.
    func run<T: Sendable>(_ providerId: String, caller: String, _ call: () async throws -> T) async throws -> T {
        guard let breaker = breakers[providerId] else { return try await call() }
        let probe = try await breaker.admit(now: clock.now(), caller: caller)
        do {
            let value = try await call()
            await breaker.record(.answered, probe: probe, caller: caller, now: clock.now())
            return value
        } catch let error as GatehouseError where !Task.isCancelled {
            // A call the gateway refused itself (`.overloaded`) says nothing of the provider.
            let outcome: CircuitBreaker.Outcome = error.situation == .overloaded ? .unknown : error.countsAgainstUpstream ? .failed : .answered
            await breaker.record(outcome, probe: probe, caller: caller, now: clock.now())
            throw error
        } catch {
            await breaker.record(.unknown, probe: probe, caller: caller, now: clock.now())
            throw error
        }
    }
}
