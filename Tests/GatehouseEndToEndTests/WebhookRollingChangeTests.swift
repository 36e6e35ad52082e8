import CurlClient
import Foundation
@_spi(Testing) import GatehouseCore
import GatehouseSQLite
import GatehouseTestSupport
import Logging
import Testing

/// Webhook endpoints configured differently on two instances, as during a rolling change.
@Suite struct WebhookRollingChangeTests {
    @Test(
        "an event an instance's configuration does not take is claimable again 30 s later, and an instance that takes it then delivers it, well inside the ten minutes' grace"
    )
    func anInstanceThatTakesTheTypeSendsItSoon() async throws {
        // The deployment delivers nothing itself (no webhooks): the two dispatchers of this
        // test stand for two instances, one narrowed, one not.
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let uid = try account(try await browser.complete(login: "octocat")).uid
            let storage = try SQLiteStorage(path: deployment.databasePath)
            let event = WebhookEvent.account(.accountDisabled, uid: uid, at: deployment.clock.now())
            let entry = OutboxEntry(
                eventId: event.id, endpoint: "sample-app", type: event.type.rawValue, payload: try JSONCoding.encoder().encode(event),
                createdAt: event.timestamp)
            _ = try await Outbox.$entries.withValue([entry]) { try await storage.setDisabled(uid: uid, disabled: true) }
            let http = CurlHTTPClient()
            defer { http.shutdown() }
            func dispatcher(_ events: Set<WebhookEventType>?) -> WebhookDispatcher {
                WebhookDispatcher(
                    configuration: WebhookTests.sampleApp(events: events)(deployment.emulatorURL), storage: storage, http: http,
                    clock: deployment.clock, metrics: .disabled, logger: Logger(label: "test"))
            }
            let (narrowed, wide) = (dispatcher([.accountCreated]), dispatcher(nil))
            let first = try await narrowed.round("sample-app")
            #expect(first.claimed == 1 && first.postponed == 1)
            #expect(try await wide.round("sample-app").claimed == 0, "left alone while it waits")
            deployment.clock.advance(by: 31)
            let second = try await wide.round("sample-app")
            #expect(second.claimed == 1 && second.postponed == 0, "\(second)")
            #expect(try await WebhookTests.received(deployment).map(\.id) == [event.id])
            #expect(try await storage.outboxEntries(status: .pending, after: nil, limit: 10).isEmpty)
        }
    }
}
