import Foundation
import GatehouseCore
import Hummingbird

/// The console's webhooks: the configured endpoints with their last outcome, the pending and
/// failed deliveries, redelivery.
extension ConsoleRoutes {
    /// Deliveries listed per status.
    static let deliveriesShown = 100

    /// A receiver's URL as the page shows it: its origin, the rest elided. Receivers' URLs often
    /// carry a token in their path or query (`hooks.example.com/services/T0/B0/XXXX`), which every
    /// operator who may read the console would otherwise see.
    static func shown(_ url: String) -> String {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme, let host = parts.host else { return "(not shown)" }
        let origin = "\(scheme)://\(parts.percentEncodedHost ?? host)\(parts.port.map { ":\($0)" } ?? "")"
        return parts.percentEncodedPath.count > 1 || parts.percentEncodedQuery != nil ? origin + "/…" : origin + "/"
    }

    func registerWebhooks(into table: inout RouteTable) {
        let routes = self
        let gatehouse = self.gatehouse
        table.add(.get, "/admin/webhooks") { request, _ in
            try await routes.page(request) { who in
                let outcomes = gatehouse.webhooks?.outcomes() ?? [:]
                let endpoints: [[String: Any]] = (gatehouse.configuration.webhooks?.endpoints ?? []).map { endpoint in
                    [
                        "name": endpoint.name, "url": Self.shown(endpoint.url),
                        "events": endpoint.events.map { $0.map(\.rawValue).sorted().joined(separator: ", ") } ?? "every event",
                        "outcome": outcomes[endpoint.name] ?? "none yet",
                    ]
                }
                var lists: [[String: Any]] = []
                for (status, heading) in [(OutboxEntry.Status.pending, "Waiting for delivery"), (.failed, "Failed")] {
                    let entries = try await gatehouse.storage.outboxEntries(status: status, after: nil, limit: Self.deliveriesShown)
                    lists.append([
                        "status": status.rawValue, "heading": heading,
                        "deliveries": entries.map { entry in
                            [
                                "id": entry.id, "eventId": entry.eventId, "type": entry.type, "endpoint": entry.endpoint,
                                "created": Self.date(entry.createdAt), "attempts": entry.attempts, "lastError": entry.lastError ?? "",
                            ]
                        },
                    ])
                }
                return routes.views.render(
                    "webhooks", ["title": "Webhooks", "endpoints": endpoints, "lists": lists], operator: who, request: request)
            }
        }
        table.add(.post, "/admin/webhooks/deliveries/{id}/redeliver") { request, context in
            try await routes.page(request) { who in
                guard let who else { throw Refusal.signedOut }
                try routes.requireOwnOrigin(request)
                try await gatehouse.redeliver(try context.parameters.require("id"), by: .operator(who.profile.uid))
                return Self.done("/admin/webhooks", "redelivered")
            }
        }
    }
}
