import GatehouseCore
import Testing

/// What makes a webhook configuration unusable before anything is sent.
@Suite struct WebhookConfigurationTests {
    static let secret = "whsec_" + String(repeating: "A", count: 32)

    static func endpoint(_ name: String) -> WebhookConfiguration.Endpoint {
        .init(name: name, url: "https://hooks.example/\(name)", events: nil, secrets: [secret])
    }

    @Test("endpoint names are unique, not empty and hold no dot: a delivery's id is <event id>.<endpoint>, the outbox's key")
    func endpointNames() {
        #expect(WebhookConfiguration(endpoints: [Self.endpoint("app"), Self.endpoint("billing")]).problem() == nil)
        for names in [["app", "app"], [""], ["a.b"], ["app", "billing", "app"]] {
            let problem = WebhookConfiguration(endpoints: names.map(Self.endpoint)).problem()
            #expect(problem?.contains("webhook endpoint names are unique") == true, "\(names): \(String(describing: problem))")
        }
    }
}
