import CurlClient
import Foundation
import Logging
import StandardWebhooks
import Synchronization

/// Delivers the outbox: claims due entries under a lease (one instance gets each), posts each
/// signed body through the libcurl client — a few at a time per endpoint, holding no store
/// connection while it waits — and records the outcome: a 2xx removes the entry, `410 Gone`
/// pauses that endpoint on this instance (its entries wait, unsent, and one tries it again at
/// each `goneProbeInterval`), anything else is retried after the backoff (± 20 %), then
/// failed. An entry of a type this instance's configuration of its endpoint does not take
/// waits, unsent, for an instance that takes it (claimable again after `untakenTypeRetry`)
/// until `untakenTypeGrace` after it was recorded, then fails. Undelivered entries older than the retention are dropped, counted and
/// logged.
public final class WebhookDispatcher: Sendable {
    let configuration: WebhookConfiguration
    /// The outbox.
    let storage: any WebhookStore
    let http: CurlHTTPClient
    let clock: any GatehouseClock
    /// The monotonic clock that times a claim and its deliveries against its lease: a step of
    /// the wall clock neither lengthens nor shortens them.
    let uptime: @Sendable () -> ContinuousClock.Instant
    let metrics: GatehouseMetrics
    let logger: Logger
    private let signers: [String: WebhookSigner]
    private let urls: [String: String]
    /// Each endpoint as configured now: an entry recorded under an earlier configuration is
    /// sent only if the endpoint still receives its type.
    private let endpoints: [String: WebhookConfiguration.Endpoint]
    /// Endpoints paused by a `410 Gone`, each with when one of its entries is tried again.
    private let paused = Mutex<[String: Date]>([:])
    /// How long the endpoint's other entries wait for the answer of the one that tries it.
    static let goneProbeWait: TimeInterval = 5
    /// When each endpoint last warned of a claim written late in its lease (`uptime`).
    private let lateWarnings = Mutex<[String: ContinuousClock.Instant]>([:])
    /// Each endpoint's last outcome, for `gatehouse check` and the logs.
    private let lastOutcomes = Mutex<[String: String]>([:])
    /// When the rounds read the backlog gauges: at most every 5 s.
    private let backlogReadings = Mutex(BacklogReadings(interval: .seconds(5)))
    /// How long after it was recorded an event of a type this instance's configuration of its
    /// endpoint does not take waits for an instance that takes it (ten minutes: a rolling
    /// change of the configuration; under the 15 minutes the oldest-event alert waits).
    static let untakenTypeGrace: TimeInterval = 600
    /// How long such an event waits before it may be claimed again (by an instance that takes
    /// it, during that grace): a rolling change moves it on within this, not at the grace's end.
    static let untakenTypeRetry: TimeInterval = 30
    /// What a claim's lease keeps after its deliveries' time for their outcomes' records, at
    /// least: as long as the claim took to be written, when that was longer.
    static let outcomeReserve = Duration.seconds(2)
    /// The shortest time a delivery is given: with less of its claim's lease left, it is not sent.
    static let shortestAttempt = Duration.seconds(1)
    /// Each endpoint's wake-up signal (a round starts at once).
    private let wakeUps: [String: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation)]

    /// A dispatcher for `configuration`'s endpoints (`uptime` for tests that make a claim take
    /// longer than it did).
    public init(
        configuration: WebhookConfiguration, storage: any WebhookStore, http: CurlHTTPClient, clock: any GatehouseClock,
        uptime: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }, metrics: GatehouseMetrics, logger: Logger
    ) {
        self.configuration = configuration
        self.storage = storage
        self.http = http
        self.clock = clock
        self.uptime = uptime
        self.metrics = metrics
        self.logger = logger
        var signers: [String: WebhookSigner] = [:]
        var urls: [String: String] = [:]
        var wakeUps: [String: (AsyncStream<Void>, AsyncStream<Void>.Continuation)] = [:]
        for endpoint in configuration.endpoints {
            signers[endpoint.name] = WebhookSigner(secrets: endpoint.secrets.compactMap(WebhookSecret.init))
            urls[endpoint.name] = endpoint.url
            wakeUps[endpoint.name] = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        }
        self.signers = signers
        self.urls = urls
        endpoints = Dictionary(configuration.endpoints.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.wakeUps = wakeUps
    }

    /// When an entry of `endpoint` waits until while a `410 Gone` pauses it, or `nil` when it
    /// is not paused or its pause is over: when `probing`, this attempt is then the one that
    /// tries it, and the others wait for its answer (`post` pauses the endpoint again on a
    /// `410`, and ends the pause on any other); otherwise (an attempt that will not send) the
    /// pause is left for the next.
    private func pausedUntil(_ endpoint: String, probing: Bool) -> Date? {
        let now = clock.now()
        return paused.withLock { paused in
            guard let until = paused[endpoint] else { return nil }
            if now < until { return until }
            guard probing else { return nil }
            // The others wait for that try's answer, which may take the whole delivery timeout.
            paused[endpoint] = now.addingTimeInterval(max(Self.goneProbeWait, configuration.timeout + 1))
            return nil
        }
    }

    /// Ends `endpoint`'s pause, if any: it answered something other than `410`, or nothing
    /// (its entries then retry on their own backoff, as any receiver that is down).
    private func endPause(_ endpoint: String) {
        if paused.withLock({ $0.removeValue(forKey: endpoint) }) != nil {
            logger.notice("webhook endpoint answered again: deliveries to it resume", metadata: ["webhook.endpoint": "\(endpoint)"])
        }
    }

    /// Lifts this instance's pause of the endpoint of delivery `id` (`<event id>.<endpoint>`),
    /// which an operator redelivers: that entry is sent when it is claimed.
    public func resume(delivery id: String) {
        guard let dot = id.firstIndex(of: ".") else { return }
        let endpoint = String(id[id.index(after: dot)...])
        paused.withLock { _ = $0.removeValue(forKey: endpoint) }
    }

    /// Starts a round of every endpoint now (a write recorded events).
    public func wake() {
        for (_, signal) in wakeUps { signal.continuation.yield() }
    }

    /// Each endpoint's last outcome (`delivered`, `retrying: …`, `failed: …`).
    public func outcomes() -> [String: String] {
        lastOutcomes.withLock { $0 }
    }

    /// Delivers until the task is cancelled: one worker per endpoint, so a receiver that is
    /// down or slow delays only its own events; and the retention's purge.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            for endpoint in configuration.endpoints {
                group.addTask { await self.work(endpoint.name) }
            }
            group.addTask { await self.purge() }
        }
    }

    /// One endpoint's worker: a round when woken or at the poll interval; at once again when
    /// the round was full and sent every entry. A round with a delivery the gateway could not
    /// send (its calls out full) waits like any other: otherwise a backlog would be claimed and
    /// postponed again without pause, two writes per entry each second, for as long as the
    /// calls out stay full.
    private func work(_ endpoint: String) async {
        guard let signal = wakeUps[endpoint] else { return }
        var iterator = signal.stream.makeAsyncIterator()
        while !Task.isCancelled {
            var full = false
            do {
                let (claimed, postponed) = try await round(endpoint)
                full = claimed == configuration.concurrencyPerEndpoint && postponed == 0
                // The backlog gauges follow the rounds that delivered or rescheduled something,
                // not only the purge interval: within `BacklogReadings`' interval and a poll interval.
                try await refreshBacklogAfterRound(changed: claimed > 0)
            } catch is CancellationError {
                return
            } catch {
                logger.warning("webhook delivery round failed", metadata: ["webhook.endpoint": "\(endpoint)", "error": "\(error)"])
            }
            if full { continue }
            // Woken by a local write, or the poll interval: other instances' events wait at
            // most that long. A timer cancelled by a wake-up signals nothing: its signal would
            // wait in the buffer and start the next round at once, and that round's timer the
            // one after, for ever.
            let timer = Task { [interval = configuration.pollInterval, continuation = signal.continuation] in
                guard (try? await Task.sleep(for: interval)) != nil else { return }
                continuation.yield()
            }
            _ = await iterator.next()
            timer.cancel()
        }
    }

    /// The retention's purge and the backlog gauges, every purge interval.
    private func purge() async {
        while !Task.isCancelled {
            do {
                try await dropExpired()
                try await refreshBacklog()
            } catch {
                logger.warning("webhook outbox purge failed", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: configuration.purgeInterval)
        }
    }

    /// Reads the backlog gauges after a round when `backlogReadings` says so.
    private func refreshBacklogAfterRound(changed: Bool) async throws {
        let now = ContinuousClock.now
        guard backlogReadings.withLock({ $0.shouldRead(at: now, changed: changed) }) else { return }
        do {
            try await refreshBacklog()
        } catch {
            backlogReadings.withLock { $0.failed() }
            throw error
        }
    }

    /// Sets the backlog gauges from the outbox (every instance's pending entries).
    private func refreshBacklog() async throws {
        let backlog = try await storage.outboxBacklog()
        metrics.webhookBacklog(count: backlog.count, oldestAge: backlog.oldest.map { max(0, clock.now().timeIntervalSince($0)) } ?? 0)
    }

    /// Claims at most the endpoint's concurrency of due entries and delivers them side by
    /// side; answers how many it claimed and how many of those were postponed (unsent, or cut
    /// short by the claim's lateness) without an attempt spent. The
    /// lease outlasts the round: it runs 5 s longer than the delivery timeout, from the claim's
    /// statement on PostgreSQL and from the caller's time on SQLite; timed from before the
    /// claim, each delivery must end before it by as long as the claim took to be written, 2 s
    /// at least, which its outcome's record may take too. A claim written more than 2.5 s late
    /// gives its deliveries less than the timeout, and one written later than half of the
    /// timeout and 2 s sends nothing (`late-claim`, no attempt spent): another instance may
    /// claim the entries once the lease ends, and must not find them still being delivered.
    /// The lease's own end is the store's clock: the PostgreSQL server's, on SQLite the caller's.
    @_spi(Testing) public func round(_ endpoint: String) async throws -> (claimed: Int, postponed: Int) {
        let lease = OutboxLease(duration: configuration.timeout + 5)
        let claimStarted = uptime()
        let claimed = try await storage.claimOutbox(
            endpoint: endpoint, now: clock.now(), lease: lease, limit: configuration.concurrencyPerEndpoint)
        let claimTook = uptime() - claimStarted
        let sendBy = claimStarted + .milliseconds(Int(lease.duration * 1000)) - max(Self.outcomeReserve, claimTook)
        if !claimed.isEmpty, sendBy - uptime() < .milliseconds(Int(configuration.timeout * 1000)) {
            warnOfLateClaim(endpoint, took: claimTook, lease: lease)
        }
        let postponed = await withTaskGroup(of: Bool.self) { group in
            for entry in claimed {
                group.addTask { await self.attempt(entry, lease: lease, sendBy: sendBy) }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        return (claimed.count, postponed)
    }

    /// Warns that `endpoint`'s claim was written late in its `lease`: at most once a minute
    /// per endpoint, since a slow store makes every round late.
    private func warnOfLateClaim(_ endpoint: String, took: Duration, lease: OutboxLease) {
        let now = uptime()
        let due = lateWarnings.withLock { warned in
            if let last = warned[endpoint], now - last < .seconds(60) { return false }
            warned[endpoint] = now
            return true
        }
        guard due else { return }
        logger.warning(
            "webhook claim written late in its lease: its deliveries are given less than the timeout, or not sent (late-claim); the store is slow",
            metadata: [
                "webhook.endpoint": "\(endpoint)", "webhook.claim_ms": .stringConvertible(took.wholeMilliseconds),
                "webhook.lease_ms": .stringConvertible(Int(lease.duration * 1000)),
            ])
    }

    /// One attempt, whose post ends by `sendBy`, and its record under the claim's `lease`;
    /// whether it was postponed (unsent, or cut short) without an attempt spent.
    @discardableResult
    private func attempt(_ entry: OutboxEntry, lease: OutboxLease, sendBy: ContinuousClock.Instant) async -> Bool {
        let started = ContinuousClock.now
        let outcome: DeliveryOutcome
        let label: String
        let left = sendBy - uptime()
        // Less than `shortestAttempt` of the lease left to send: sent now, the entry could
        // still be in flight when the lease ends and another instance sends it too.
        let late = left < Self.shortestAttempt
        let taken = endpoints[entry.endpoint]?.events.map { events in WebhookEventType(rawValue: entry.type).map(events.contains) ?? false } ?? true
        // Only an entry that will be sent takes a paused endpoint's try.
        if let until = pausedUntil(entry.endpoint, probing: !late && taken) {
            (outcome, label) = (
                .postponed(
                    until: until,
                    error:
                        "not sent: the endpoint answered 410 Gone; one of its events tries it again every \(Int(configuration.goneProbeInterval)) s"),
                "gone"
            )
        } else if !taken {
            // This instance's configuration of the endpoint does not take the type
            // (`GATEHOUSE_WEBHOOK_…_EVENTS` narrowed since the event was recorded, or widened
            // on the instances already restarted, or a type a newer version records): not sent.
            // Left, no attempt spent, for an instance that takes it until the grace after it
            // was recorded (a rolling change), then failed: claimed again every
            // `untakenTypeRetry` at most, and never old enough in the outbox to look like a
            // receiver that is down.
            let graceEnd = entry.createdAt.addingTimeInterval(Self.untakenTypeGrace)
            let now = clock.now()
            if now < graceEnd {
                let error = "not sent: this instance's configuration of the endpoint does not take \(entry.type) events"
                (outcome, label) = (.postponed(until: min(graceEnd, now.addingTimeInterval(Self.untakenTypeRetry)), error: error), "not-taken")
            } else {
                (outcome, label) = (.failed(status: nil, error: "the endpoint does not take \(entry.type) events"), "not-taken")
            }
        } else if late {
            (outcome, label) = (
                .postponed(until: clock.now(), error: "not sent: the claim was written too late in its lease; sent in a later round"),
                "late-claim"
            )
        } else if let url = urls[entry.endpoint], let signer = signers[entry.endpoint] {
            (outcome, label) = await post(entry, url: url, signer: signer, within: left)
        } else {
            (outcome, label) = (.failed(status: nil, error: "the endpoint is no longer configured"), "failed")
        }
        // Cut short by the gateway's stop: not an outcome of the receiver's, so none is recorded
        // (and no attempt spent); the lease passes and an instance sends the entry again. A
        // delivery the receiver took is recorded still: it is not sent twice.
        if Task.isCancelled, outcome != .delivered { return false }
        metrics.webhookDelivery(endpoint: entry.endpoint, outcome: label, duration: ContinuousClock.now - started)
        if outcome == .delivered { metrics.webhookDelay(endpoint: entry.endpoint, seconds: clock.now().timeIntervalSince(entry.createdAt)) }
        lastOutcomes.withLock { $0[entry.endpoint] = Self.describe(outcome) }
        do {
            if Task.isCancelled {
                // A delivery the receiver took while the gateway stops: recorded in a task the
                // stop does not cancel, since the stores give up on a cancelled caller's write
                // (GRDB checks before it starts) and the entry would be sent again after the
                // restart. One store write, bounded by the store's own timeouts.
                try await Task { try await storage.completeOutbox(id: entry.id, lease: lease, outcome: outcome) }.value
            } else {
                try await storage.completeOutbox(id: entry.id, lease: lease, outcome: outcome)
            }
        } catch {
            // The lease runs out and another round tries again: at least once.
            logger.warning("webhook delivery outcome not recorded", metadata: ["webhook.endpoint": "\(entry.endpoint)", "error": "\(error)"])
        }
        if case .postponed = outcome { return true }
        return false
    }

    /// Posts the entry, waiting for its answer for the delivery timeout, or `within` when that
    /// is shorter (a claim written late in its lease); the outcome and its metric label. A
    /// delivery cut to less than half of the timeout that gets no answer spends no attempt
    /// (the gateway's store cut it short, not the receiver) and waits the backoff as a retry
    /// would; one given half of the timeout or more is a receiver's failure like any.
    private func post(_ entry: OutboxEntry, url: String, signer: WebhookSigner, within: Duration) async -> (DeliveryOutcome, String) {
        let configured = Duration.milliseconds(Int(configuration.timeout * 1000))
        let timeout = min(configured, within)
        var headers: OutboundHeaders = ["Content-Type": "application/json"]
        for (name, value) in signer.headers(id: entry.eventId, timestamp: Int(clock.now().timeIntervalSince1970), body: entry.payload) {
            headers.add(name, value)
        }
        let status: Int?
        let reason: String
        do {
            // The status decides; the receiver's body is not read (a long one is no failure).
            let response = try await http.stream(
                OutboundRequest(method: "POST", url: url, headers: headers, body: Array(entry.payload), timeout: timeout, connectTimeout: timeout)
            ).head
            if response.status != 410 { endPause(entry.endpoint) }
            if (200..<300).contains(response.status) { return (.delivered, "delivered") }
            if response.status == 410 {
                let until = clock.now().addingTimeInterval(configuration.goneProbeInterval)
                let newly = paused.withLock { $0.updateValue(until, forKey: entry.endpoint) == nil }
                if newly {
                    logger.error(
                        "webhook endpoint answered 410 Gone: its deliveries wait, one tried at each interval until it answers otherwise (or an operator redelivers one), for as long as the retention keeps them",
                        metadata: ["webhook.endpoint": "\(entry.endpoint)", "webhook.probe_interval_s": "\(Int(configuration.goneProbeInterval))"])
                }
                return (
                    .postponed(until: until, error: "410 Gone: the endpoint is paused, tried again in \(Int(configuration.goneProbeInterval)) s"),
                    "gone"
                )
            }
            (status, reason) = (response.status, "answered \(response.status)")
        } catch let failure as OutboundError where failure.kind == .overloaded {
            // The gateway's own calls out were full: nothing was sent, so no attempt is spent.
            // Again in about a second, as `Retry-After: 1` tells the gateway's other callers.
            let again = clock.now().addingTimeInterval(Double.random(in: 0.8...1.2))
            return (.postponed(until: again, error: "not sent: \(failure.message)"), "overloaded")
        } catch let failure as OutboundError where failure.kind == .timedOut && timeout * 2 < configured {
            // The endpoint's pause, if this was its try, stays: the receiver was not given its time.
            let seconds = String(format: "%.1f", Double(timeout.wholeMilliseconds) / 1000)
            let error = "no answer within \(seconds) s, less than half of the timeout: the claim was written late in its lease; not counted"
            let steps = configuration.backoff
            let wait = (steps.isEmpty ? 5 : steps[min(entry.attempts, steps.count - 1)]) * Double.random(in: 0.8...1.2)
            return (.postponed(until: clock.now().addingTimeInterval(wait), error: error), "cut-short")
        } catch let failure as OutboundError {
            endPause(entry.endpoint)
            let waited = timeout < configured ? String(format: "%.1f", Double(timeout.wholeMilliseconds) / 1000) : "\(Int(configuration.timeout))"
            (status, reason) = (nil, failure.kind == .timedOut ? "no answer within \(waited) s" : failure.message)
        } catch {
            endPause(entry.endpoint)
            (status, reason) = (nil, "the call failed")
        }
        guard entry.attempts < configuration.backoff.count else { return (.failed(status: status, error: reason), "failed") }
        let wait = configuration.backoff[entry.attempts] * Double.random(in: 0.8...1.2)
        return (.retry(at: clock.now().addingTimeInterval(wait), status: status, error: reason), "retry")
    }

    /// Drops what the retention no longer keeps.
    private func dropExpired() async throws {
        let now = clock.now()
        let dropped = try await storage.dropOutbox(writtenBefore: now.addingTimeInterval(-configuration.retention), now: now)
        for (endpoint, count) in dropped.sorted(by: { $0.key < $1.key }) where count > 0 {
            metrics.webhookDropped(endpoint: endpoint, count: count)
            logger.warning(
                "undelivered webhook events dropped after the retention",
                metadata: ["webhook.endpoint": "\(endpoint)", "webhook.dropped": .stringConvertible(count)])
        }
    }

    static func describe(_ outcome: DeliveryOutcome) -> String {
        switch outcome {
        case .delivered: "delivered"
        case .retry(_, _, let error): "retrying: \(error)"
        case .failed(_, let error): "failed: \(error)"
        case .postponed(_, let error): "postponed: \(error)"
        }
    }
}
