import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird

/// `/v1/admin/webhooks/…`: the webhook outbox for operators (scope `admin:webhooks`, or `admin`):
/// pending and failed deliveries, paged, and redelivery of one.
struct AdminWebhookRoutes {
    let gatehouse: Gatehouse
    let browser: BrowserPolicy

    /// Deliveries per page.
    static let pageSize = 100

    /// A page of the deliveries with `status` after `cursor`, and the cursor of the next page
    /// when more follow (`nil` on the last page, also when it is full).
    static func page(of storage: any GatehouseStorage, status: OutboxEntry.Status, after cursor: String?) async throws -> (
        entries: [OutboxEntry], next: String?
    ) {
        let entries = try await storage.outboxEntries(status: status, after: cursor, limit: pageSize + 1)
        guard entries.count > pageSize else { return (entries, nil) }
        return (Array(entries.prefix(pageSize)), entries[pageSize - 1].id)
    }

    /// A cursor as a query carries it: `nil` when absent or empty; at most 256 bytes (an entry's id
    /// is far shorter).
    static func cursor(_ value: String?) throws -> String? {
        guard let value, !value.isEmpty else { return nil }
        guard value.utf8.count <= 256 else { throw GatehouseError.invalidArgument("cursor is too long.") }
        return value
    }

    func register(into table: inout RouteTable) {
        let storage = gatehouse.storage
        let webhooks = gatehouse.webhooks
        let browser = self.browser
        let gatehouse = self.gatehouse
        /// The key, authorized; the audit's actor.
        @Sendable func authorize(_ context: GatehouseRequestContext) async throws -> AuditActor {
            .serviceKey(try await browser.serviceKey(context, scope: "admin:webhooks").id)
        }
        table.add(.get, "/v1/admin/webhooks/deliveries") { request, context in
            // The events' payloads are shown to keys that may read that administration.
            let scopes = try await browser.serviceKey(context, scope: "admin:webhooks").scopes
            let query = request.queryDictionary
            guard let status = OutboxEntry.Status(rawValue: query["status"] ?? "pending") else {
                throw GatehouseError.invalidArgument("status must be pending or failed.")
            }
            let page = try await Self.page(of: storage, status: status, after: try Self.cursor(query["cursor"]))
            return try Response.json(
                DeliveryPage(
                    deliveries: page.entries.map { Delivery($0, showingEvent: WebhookEventType.readable($0.type, by: scopes)) },
                    nextCursor: page.next,
                    endpoints: webhooks?.outcomes() ?? [:]))
        }
        table.add(.post, "/v1/admin/webhooks/deliveries/{id}/redeliver") { request, context in
            try await gatehouse.redeliver(try context.parameters.require("id"), by: try await authorize(context))
            return Response(status: .accepted)
        }
    }

    /// A page of deliveries.
    struct DeliveryPage: Encodable {
        let deliveries: [Delivery]
        /// The cursor of the next page, or `null` on the last one.
        let nextCursor: String?
        /// Each endpoint's last outcome on this instance.
        let endpoints: [String: String]

        enum CodingKeys: String, CodingKey { case deliveries, nextCursor, endpoints }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(deliveries, forKey: .deliveries)
            try c.encode(nextCursor, forKey: .nextCursor)
            try c.encode(endpoints, forKey: .endpoints)
        }
    }

    /// One event for one endpoint.
    struct Delivery: Encodable {
        let id: String
        let eventId: String
        let endpoint: String
        let type: String
        let status: String
        let attempts: Int
        let createdAt: Date
        let nextAttemptAt: Date
        let lastStatus: Int?
        let lastError: String?
        /// The event as it is delivered; `null` to a key without the scope that reads it
        /// (`WebhookEventType.readingScope`).
        let event: JSONValue

        init(_ entry: OutboxEntry, showingEvent: Bool) {
            id = entry.id
            eventId = entry.eventId
            endpoint = entry.endpoint
            type = entry.type
            status = entry.status.rawValue
            attempts = entry.attempts
            createdAt = entry.createdAt
            nextAttemptAt = entry.nextAttemptAt
            lastStatus = entry.lastStatus
            lastError = entry.lastError
            event = showingEvent ? (try? JSONValue.parse(entry.payload)) ?? .null : .null
        }

        enum CodingKeys: String, CodingKey {
            case id, eventId, endpoint, type, status, attempts, createdAt, nextAttemptAt, lastStatus, lastError, event
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(eventId, forKey: .eventId)
            try c.encode(endpoint, forKey: .endpoint)
            try c.encode(type, forKey: .type)
            try c.encode(status, forKey: .status)
            try c.encode(attempts, forKey: .attempts)
            try c.encode(createdAt, forKey: .createdAt)
            try c.encode(nextAttemptAt, forKey: .nextAttemptAt)
            try c.encode(lastStatus, forKey: .lastStatus)
            try c.encode(lastError, forKey: .lastError)
            try c.encode(event, forKey: .event)
        }
    }
}
