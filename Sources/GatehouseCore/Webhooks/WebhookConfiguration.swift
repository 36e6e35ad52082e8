import Foundation

/// Where events are delivered (`GATEHOUSE_WEBHOOK_<NAME>_*`) and how long undelivered ones
/// are kept (`GATEHOUSE_WEBHOOK_RETENTION`).
public struct WebhookConfiguration: Sendable {
    /// One receiver.
    public struct Endpoint: Sendable, Equatable {
        /// The configured name (`<NAME>` lower-cased): the metric label and the admin listing's.
        public var name: String
        /// The receiver's URL (https; plain http only to a loopback address).
        public var url: String
        /// The event types it receives; `nil`: all (`*`).
        public var events: Set<WebhookEventType>?
        /// The Standard Webhooks secrets (`whsec_…`); every one signs.
        public var secrets: [String]

        /// An endpoint.
        public init(name: String, url: String, events: Set<WebhookEventType>?, secrets: [String]) {
            self.name = name
            self.url = url
            self.events = events
            self.secrets = secrets
        }

        /// Whether it receives `type`.
        public func receives(_ type: WebhookEventType) -> Bool {
            events?.contains(type) ?? true
        }
    }

    /// The receivers.
    public var endpoints: [Endpoint]
    /// How long an undelivered event is kept (default 3 days).
    public var retention: TimeInterval = 3 * 86400
    /// How long one delivery may take.
    public var timeout: TimeInterval = 10
    /// How often the store is looked at for due deliveries when nothing woke the worker.
    public var pollInterval: Duration = .seconds(1)
    /// How often undelivered entries past the retention are dropped.
    public var purgeInterval: Duration = .seconds(60)
    /// Deliveries in flight per endpoint at most.
    public var concurrencyPerEndpoint = 8
    /// The waits between attempts (each ± 20 %); after the last one fails the event is marked
    /// failed: about a day in all, the first retry within 10 s.
    public var backoff: [TimeInterval] = [5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 28800]
    /// How long an endpoint that answered `410 Gone` pauses between two tries (5 minutes). A
    /// `410` is taken as the receiver's "no more", but a proxy or a deploy in front of it may
    /// say so for a moment: its entries wait for the retention (no attempt spent) rather than
    /// fail at once.
    public var goneProbeInterval: TimeInterval = 300

    /// Endpoints with the defaults.
    public init(endpoints: [Endpoint], retention: TimeInterval = 3 * 86400) {
        self.endpoints = endpoints
        self.retention = retention
    }

    /// Why this configuration is unusable, or `nil`.
    public func problem() -> String? {
        var names = Set<String>()
        for endpoint in endpoints {
            // A delivery's id is `<event id>.<endpoint>`, and the outbox keys entries by it.
            guard !endpoint.name.isEmpty, !endpoint.name.contains("."), names.insert(endpoint.name).inserted else {
                return "webhook endpoint names are unique, not empty, and hold no \".\" (\(endpoint.name.debugDescription))"
            }
            let prefix = "GATEHOUSE_WEBHOOK_\(endpoint.name.uppercased().replacingOccurrences(of: "-", with: "_"))_"
            guard !endpoint.secrets.isEmpty else { return "\(prefix)SECRETS must be set" }
            guard endpoint.secrets.allSatisfy(HookConfiguration.isWebhookSecret) else {
                return "\(prefix)SECRETS entries are whsec_ followed by the base64 of 24 to 64 bytes"
            }
            guard let components = URLComponents(string: endpoint.url), let host = components.host, !host.isEmpty,
                components.user == nil, components.password == nil
            else { return "\(prefix)URL must be an absolute URL without credentials" }
            switch components.scheme?.lowercased() {
            case "https": continue
            case "http" where HookConfiguration.isLoopback(host): continue
            default: return "\(prefix)URL must be https (plain http only to a loopback address)"
            }
        }
        return nil
    }
}
