import Foundation

/// Records webhook events with the store write that makes them true: `recording(events) {
/// storage.write(…) }` gives the write one outbox entry per event and endpoint that receives
/// it (the stores insert them in the write's transaction). With no endpoint it only writes.
public struct EventRecorder: Sendable {
    /// The receivers.
    let endpoints: [WebhookConfiguration.Endpoint]
    /// Counts the events written.
    let metrics: GatehouseMetrics
    /// Told after a write recorded events (the dispatcher of this instance starts at once).
    let wake: @Sendable () -> Void

    /// No webhooks: writes only.
    public static let disabled = EventRecorder(endpoints: [], metrics: .disabled, wake: {})

    /// Records for `endpoints`.
    public init(endpoints: [WebhookConfiguration.Endpoint], metrics: GatehouseMetrics, wake: @escaping @Sendable () -> Void) {
        self.endpoints = endpoints
        self.metrics = metrics
        self.wake = wake
    }

    /// Whether any endpoint receives `type` (an event that no one receives is not built).
    public func wants(_ type: WebhookEventType) -> Bool {
        endpoints.contains { $0.receives(type) }
    }

    /// Runs `write` with the entries of `events`; the events count as written once it returns
    /// (the stores leave them out when the write changed nothing).
    public func recording<T>(_ events: [WebhookEvent], _ write: () async throws -> T) async throws -> T {
        let entries = try self.entries(events)
        guard !entries.isEmpty else { return try await write() }
        let result = try await Outbox.$entries.withValue(entries) { try await write() }
        if !Outbox.keep(entries, after: result).isEmpty {
            for event in events where wants(event.type) { metrics.webhookEvent(type: event.type.rawValue) }
            wake()
        }
        return result
    }

    /// One entry per event and endpoint that receives it.
    func entries(_ events: [WebhookEvent]) throws -> [OutboxEntry] {
        var entries: [OutboxEntry] = []
        for event in events {
            let receivers = endpoints.filter { $0.receives(event.type) }
            guard !receivers.isEmpty else { continue }
            let body = try JSONCoding.encoder().encode(event)
            for endpoint in receivers {
                entries.append(
                    OutboxEntry(eventId: event.id, endpoint: endpoint.name, type: event.type.rawValue, payload: body, createdAt: event.timestamp))
            }
        }
        return entries
    }
}
