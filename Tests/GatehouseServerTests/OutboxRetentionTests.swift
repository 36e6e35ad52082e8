import Foundation
import GatehouseCore
import Testing

/// Who drops undelivered webhook events past the retention: the dispatcher while endpoints are
/// configured, the periodic purge once none is.
@Suite("Outbox retention")
struct OutboxRetentionTests {
    @Test("without endpoints the periodic purge applies the configured retention (3 days by default); with one, the dispatcher does")
    func purgeTakesOverWithoutEndpoints() async throws {
        try await withInProcessGateway { _, gatehouse in
            #expect(gatehouse.webhooks == nil)
            #expect(gatehouse.outboxRetentionWithoutDispatcher == TimeInterval(3 * 86400))
        }
        try await withInProcessGateway(gateway: { $0.webhooks = WebhookConfiguration(endpoints: [], retention: 3600) }) { _, gatehouse in
            #expect(gatehouse.outboxRetentionWithoutDispatcher == TimeInterval(3600))
        }
        let endpoint = WebhookConfiguration.Endpoint(
            name: "app", url: "http://127.0.0.1:9/hooks", events: nil, secrets: ["whsec_Z2F0ZWhvdXNlLW91dGJveC1yZXRlbnRpb24tdGVzdCE="])
        try await withInProcessGateway(gateway: { $0.webhooks = WebhookConfiguration(endpoints: [endpoint], retention: 3600) }) { _, gatehouse in
            #expect(gatehouse.webhooks != nil)
            #expect(gatehouse.outboxRetentionWithoutDispatcher == nil)
        }
    }
}
