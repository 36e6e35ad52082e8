import CurlClient
import Foundation
@_spi(Testing) import GatehouseCore
import GatehouseSQLite
import GatehouseTestSupport
import Logging
import Testing

/// A claim's lease against the time its deliveries take: a delivery ends before the lease
/// does, however long the claim took to be written, so no other instance finds it in flight.
@Suite struct WebhookLeaseTests {
    /// `base`'s outbox, whose claims each take `delay` seconds of `clock` to be written (as a
    /// commit held up by a slow disk or a replica would).
    struct SlowlyClaimedOutbox: WebhookStore {
        let base: any WebhookStore
        let clock: StoppedClock
        let delay: TimeInterval

        func claimOutbox(endpoint: String, now: Date, lease: OutboxLease, limit: Int) async throws -> [OutboxEntry] {
            let entries = try await base.claimOutbox(endpoint: endpoint, now: now, lease: lease, limit: limit)
            clock.advance(by: delay)
            return entries
        }

        func completeOutbox(id: String, lease: OutboxLease, outcome: DeliveryOutcome) async throws {
            try await base.completeOutbox(id: id, lease: lease, outcome: outcome)
        }

        func outboxEntries(status: OutboxEntry.Status, after: String?, limit: Int) async throws -> [OutboxEntry] {
            try await base.outboxEntries(status: status, after: after, limit: limit)
        }

        func redeliverOutbox(id: String, now: Date) async throws -> Bool {
            try await base.redeliverOutbox(id: id, now: now)
        }

        func dropOutbox(writtenBefore cutoff: Date, now: Date) async throws -> [String: Int] {
            try await base.dropOutbox(writtenBefore: cutoff, now: now)
        }

        func outboxBacklog() async throws -> (count: Int, oldest: Date?) {
            try await base.outboxBacklog()
        }
    }

    /// A dispatcher of the sample app's events with a 60 s delivery timeout (a lease of 65 s),
    /// on `clock`, whose claims take `delay` seconds of it.
    static func dispatcher(
        _ deployment: TestDeployment, _ storage: any WebhookStore, http: CurlHTTPClient, clock: StoppedClock, delay: TimeInterval
    ) -> WebhookDispatcher {
        var configuration = WebhookTests.sampleApp()(deployment.emulatorURL)
        configuration.timeout = 60
        return WebhookDispatcher(
            configuration: configuration, storage: SlowlyClaimedOutbox(base: storage, clock: clock, delay: delay), http: http,
            clock: clock, metrics: .disabled, logger: Logger(label: "test"))
    }

    @Test("a claim written after its lease's time to send sends nothing and spends no attempt; the next round delivers the event")
    func aLateClaimSendsNothing() async throws {
        // The deployment delivers nothing itself (no webhooks): this test's dispatchers alone work its store.
        try await withDeployment { deployment in
            let storage = try SQLiteStorage(path: deployment.databasePath)
            let event = try await WebhookTests.recordDisabledAccount(deployment, storage)
            let http = CurlHTTPClient()
            defer { http.shutdown() }
            // 63 of the lease's 65 s gone in the claim: the 2 s left are the outcome's.
            let clock = StoppedClock(at: deployment.clock.now())
            let late = try await Self.dispatcher(deployment, storage, http: http, clock: clock, delay: 63).round("sample-app")
            #expect(late.claimed == 1 && late.postponed == 1, "\(late)")
            #expect(try await deployment.emulatorStats()["POST /sample-app/webhooks"] ?? 0 == 0, "sent past its lease")
            let waiting = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
            #expect(waiting.map(\.eventId) == [event.id])
            #expect(waiting.first?.attempts == 0, "\(waiting)")
            #expect(waiting.first?.lastError?.contains("too late") == true, "\(waiting)")
            let next = try await Self.dispatcher(deployment, storage, http: http, clock: clock, delay: 0).round("sample-app")
            #expect(next.claimed == 1 && next.postponed == 0, "\(next)")
            #expect(try await WebhookTests.received(deployment).map(\.id) == [event.id])
        }
    }

    @Test("a claim written part way through its lease waits for its delivery's answer only as long as the lease has left for it")
    func aSlowClaimShortensItsDelivery() async throws {
        try await withDeployment { deployment in
            let storage = try SQLiteStorage(path: deployment.databasePath)
            let event = try await WebhookTests.recordDisabledAccount(deployment, storage)
            let http = CurlHTTPClient(configuration: CurlClientConfiguration(timeout: .seconds(120)))
            defer { http.shutdown() }
            // 55 of the lease's 65 s gone in the claim: 8 s for the delivery, 2 s for its outcome.
            let dispatcher = Self.dispatcher(deployment, storage, http: http, clock: StoppedClock(at: deployment.clock.now()), delay: 55)
            let started = ContinuousClock.now
            // The receiver has the call and holds its answer for 100 s (until released).
            let delivering = try await deployment.holdingHook("POST /sample-app/webhooks", milliseconds: 100_000, answer: "{}") {
                try await dispatcher.round("sample-app")
            }
            let round = try await delivering.value
            let took = ContinuousClock.now - started
            _ = try await deployment.control("faults/release", "{}")
            #expect(round.claimed == 1 && round.postponed == 0, "\(round)")
            // 8 s; the configured timeout would be 60 s. The bound leaves a loaded machine room.
            #expect(took < .seconds(40), "the delivery waited past its lease: \(took)")
            let waiting = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
            #expect(waiting.map(\.eventId) == [event.id])
            #expect(waiting.first?.attempts == 1, "\(waiting)")
            #expect(waiting.first?.lastError == "no answer within 8 s", "\(waiting)")
        }
    }
}
