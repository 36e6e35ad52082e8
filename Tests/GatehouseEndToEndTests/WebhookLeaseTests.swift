import CurlClient
import Foundation
@_spi(Testing) import GatehouseCore
import GatehousePostgres
import GatehouseSQLite
import GatehouseTestSupport
import Logging
import Synchronization
import Testing

/// A claim's lease against the time its deliveries take: a delivery ends before the lease
/// does, however long the claim took to be written, so no other instance finds it in flight.
@Suite struct WebhookLeaseTests {
    /// A monotonic clock that runs with the machine's and that a test moves forward.
    final class MovableUptime: Sendable {
        private let offset = Mutex(Duration.zero)

        /// The machine's monotonic time plus the offset.
        func now() -> ContinuousClock.Instant { ContinuousClock.now + offset.withLock { $0 } }

        /// Moves the clock `duration` forward.
        func advance(by duration: Duration) {
            offset.withLock { $0 += duration }
        }
    }

    /// `base`'s outbox, whose claims each take `delay` of `uptime` to be written (as a commit
    /// held up by a slow disk or a replica would), while the wall clock moves by `wallStep`.
    struct SlowlyClaimedOutbox: WebhookStore {
        /// The store the outbox is in.
        let base: any WebhookStore
        /// The dispatcher's monotonic clock, moved by `delay` in each claim.
        let uptime: MovableUptime
        /// The dispatcher's wall clock, moved by `wallStep` in each claim.
        let clock: StoppedClock
        /// How long each claim takes.
        let delay: Duration
        /// How far the wall clock moves during each claim (back, when negative).
        let wallStep: TimeInterval

        /// Claims as `base` does, then moves the clocks.
        func claimOutbox(endpoint: String, now: Date, lease: OutboxLease, limit: Int) async throws -> [OutboxEntry] {
            let entries = try await base.claimOutbox(endpoint: endpoint, now: now, lease: lease, limit: limit)
            uptime.advance(by: delay)
            clock.advance(by: wallStep)
            return entries
        }

        /// As `base`.
        func completeOutbox(id: String, lease: OutboxLease, outcome: DeliveryOutcome) async throws {
            try await base.completeOutbox(id: id, lease: lease, outcome: outcome)
        }

        /// As `base`.
        func outboxEntries(status: OutboxEntry.Status, after: String?, limit: Int) async throws -> [OutboxEntry] {
            try await base.outboxEntries(status: status, after: after, limit: limit)
        }

        /// As `base`.
        func redeliverOutbox(id: String, now: Date) async throws -> Bool {
            try await base.redeliverOutbox(id: id, now: now)
        }

        /// As `base`.
        func dropOutbox(writtenBefore cutoff: Date, now: Date) async throws -> [String: Int] {
            try await base.dropOutbox(writtenBefore: cutoff, now: now)
        }

        /// As `base`.
        func outboxBacklog() async throws -> (count: Int, oldest: Date?) {
            try await base.outboxBacklog()
        }
    }

    /// A dispatcher of the sample app's events with a delivery timeout of `timeout` (a lease 5 s
    /// longer), whose claims take `delay` of its monotonic clock while its wall clock moves `wallStep`.
    static func dispatcher(
        _ deployment: TestDeployment, _ storage: any WebhookStore, http: CurlHTTPClient, clock: StoppedClock, delay: Duration,
        wallStep: TimeInterval = 0, timeout: TimeInterval = 60
    ) -> WebhookDispatcher {
        var configuration = WebhookTests.sampleApp()(deployment.emulatorURL)
        configuration.timeout = timeout
        let uptime = MovableUptime()
        return WebhookDispatcher(
            configuration: configuration,
            storage: SlowlyClaimedOutbox(base: storage, uptime: uptime, clock: clock, delay: delay, wallStep: wallStep), http: http,
            clock: clock, uptime: { uptime.now() }, metrics: .disabled, logger: Logger(label: "test"))
    }

    /// Runs `body` with a deployment that delivers nothing itself (no webhooks), a store of its
    /// database, SQLite or PostgreSQL, for this test's dispatchers, an `account.disabled` event
    /// for the sample app in its outbox, and an HTTP client.
    static func withOutbox(
        _ store: String, _ body: @escaping @Sendable (TestDeployment, any GatehouseStorage, WebhookEvent, CurlHTTPClient) async throws -> Void
    ) async throws {
        let database = store == "PostgreSQL" ? try await PostgresTestServer.freshDatabase() : nil
        try await withDeployment(database: database) { deployment in
            let postgres = try database.map { try PostgresTestServer.store($0) }
            defer { postgres?.shutdown() }
            let storage: any GatehouseStorage = try postgres ?? SQLiteStorage(path: deployment.databasePath)
            let event = try await WebhookTests.recordDisabledAccount(deployment, storage)
            let http = CurlHTTPClient()
            defer { http.shutdown() }
            try await body(deployment, storage, event, http)
        }
    }

    @Test(
        "a claim written so late in its lease that less than 1 s is left to send sends nothing and spends no attempt; the next round delivers the event",
        arguments: ["SQLite", "PostgreSQL"])
    func aLateClaimSendsNothing(store: String) async throws {
        try await Self.withOutbox(store) { deployment, storage, event, http in
            let clock = StoppedClock(at: deployment.clock.now())
            // 32.25 s of the lease's 65 s gone in the claim, as long again kept for the outcome's
            // record: 0.5 s left to send.
            let late = try await Self.dispatcher(deployment, storage, http: http, clock: clock, delay: .milliseconds(32_250)).round("sample-app")
            #expect(late.claimed == 1 && late.postponed == 1, "\(late)")
            #expect(try await deployment.emulatorStats()["POST /sample-app/webhooks"] ?? 0 == 0, "sent too late in its lease")
            let waiting = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
            #expect(waiting.map(\.eventId) == [event.id])
            #expect(waiting.first?.attempts == 0, "\(waiting)")
            #expect(waiting.first?.lastError?.contains("too late") == true, "\(waiting)")
            let next = try await Self.dispatcher(deployment, storage, http: http, clock: clock, delay: .zero).round("sample-app")
            #expect(next.claimed == 1 && next.postponed == 0, "\(next)")
            #expect(try await WebhookTests.received(deployment).map(\.id) == [event.id])
        }
    }

    @Test(
        "a claim written part way through its lease, while the wall clock steps an hour back, waits for its delivery's answer only as long as the lease has left for it, less than half of the timeout, and spends no attempt when none comes",
        arguments: ["SQLite", "PostgreSQL"])
    func aSlowClaimShortensItsDelivery(store: String) async throws {
        try await Self.withOutbox(store) { deployment, storage, event, http in
            // The receiver holds its answer for 100 s (until released).
            try await TrustTests.fault(deployment, ["endpoint": "POST /sample-app/webhooks", "status": 200, "holdMs": 100_000, "times": 1])
            // 28 s of the lease's 65 s gone in the claim, as long again kept for the outcome's
            // record: 9 s for the delivery, whatever the wall clock does.
            let clock = StoppedClock(at: deployment.clock.now())
            let dispatcher = Self.dispatcher(deployment, storage, http: http, clock: clock, delay: .seconds(28), wallStep: -3600)
            let started = ContinuousClock.now
            let round = try await dispatcher.round("sample-app")
            let took = ContinuousClock.now - started
            _ = try await deployment.control("faults/release", "{}")
            #expect(round.claimed == 1 && round.postponed == 1, "\(round)")
            // 9 s; the configured timeout is 60 s. The bound leaves a loaded machine room.
            #expect(took < .seconds(55), "the delivery waited past its lease: \(took)")
            let waiting = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
            #expect(waiting.map(\.eventId) == [event.id])
            #expect(waiting.first?.attempts == 0, "\(waiting)")
            #expect(waiting.first?.lastError?.contains("s, less than half of the timeout") == true, "\(waiting)")
            // The first retry's backoff (5 s ± 20 %), from the stepped clock.
            let next = waiting.first?.nextAttemptAt ?? .distantPast
            #expect(next >= clock.now().addingTimeInterval(3.9), "\(waiting)")
        }
    }

    @Test(
        "when a 410 pause ends, an entry that will not be sent (a type the endpoint does not take) leaves the endpoint's try to the next entry, which is sent"
    )
    func anEntryNotSentTakesNoProbe() async throws {
        try await Self.withOutbox("SQLite") { deployment, storage, paused, http in
            let clock = StoppedClock(at: deployment.clock.now())
            // One entry a round, of the types the endpoint takes: account.disabled only.
            var configuration = WebhookTests.sampleApp(events: [.accountDisabled])(deployment.emulatorURL)
            configuration.concurrencyPerEndpoint = 1
            // Short, so that the signatures' timestamps stay within the receiver's tolerance.
            configuration.goneProbeInterval = 10
            let dispatcher = WebhookDispatcher(
                configuration: configuration, storage: storage, http: http, clock: clock, metrics: .disabled, logger: Logger(label: "test"))
            try await TrustTests.fault(deployment, ["endpoint": "POST /sample-app/webhooks", "status": 410, "times": 1])
            #expect(try await dispatcher.round("sample-app") == (claimed: 1, postponed: 1), "410 Gone pauses the endpoint")
            // An entry of a type the endpoint does not take, due before the paused one.
            clock.advance(by: 1)
            guard case .string(let uid) = paused.data["uid"] else { throw FlowError("no uid in \(paused.data)") }
            let untaken = WebhookEvent.account(.accountEnabled, uid: uid, at: clock.now())
            let entry = OutboxEntry(
                eventId: untaken.id, endpoint: "sample-app", type: untaken.type.rawValue, payload: try JSONCoding.encoder().encode(untaken),
                createdAt: untaken.timestamp)
            _ = try await Outbox.$entries.withValue([entry]) { try await storage.setDisabled(uid: uid, disabled: false) }
            clock.advance(by: configuration.goneProbeInterval)
            let first = try await dispatcher.round("sample-app")
            #expect(first == (claimed: 1, postponed: 1), "the untaken entry, not sent")
            let second = try await dispatcher.round("sample-app")
            #expect(second == (claimed: 1, postponed: 0), "the paused entry tried the endpoint")
            #expect(try await WebhookTests.received(deployment).map(\.id) == [paused.id])
        }
    }

    @Test("a delivery cut short by a late claim to half of the timeout or more that gets no answer spends its attempt, as a receiver's failure")
    func aDeliveryGivenHalfOfTheTimeoutSpendsItsAttempt() async throws {
        try await Self.withOutbox("SQLite") { deployment, storage, event, http in
            try await TrustTests.fault(deployment, ["endpoint": "POST /sample-app/webhooks", "status": 200, "holdMs": 100_000, "times": 1])
            // A 10 s timeout and a 15 s lease; 4 s gone in the claim and as long kept for the
            // outcome's record: 7 s for the delivery, less what the claim really took, twice
            // (a loaded machine's fraction of a second), more than half of the timeout.
            let round = try await Self.dispatcher(
                deployment, storage, http: http, clock: StoppedClock(at: deployment.clock.now()), delay: .seconds(4), timeout: 10
            ).round("sample-app")
            _ = try await deployment.control("faults/release", "{}")
            #expect(round.claimed == 1 && round.postponed == 0, "\(round)")
            let waiting = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
            #expect(waiting.map(\.eventId) == [event.id])
            #expect(waiting.first?.attempts == 1, "\(waiting)")
            let error = waiting.first?.lastError ?? ""
            #expect(error.hasPrefix("no answer within ") && !error.contains("half"), "\(waiting)")
        }
    }
}
