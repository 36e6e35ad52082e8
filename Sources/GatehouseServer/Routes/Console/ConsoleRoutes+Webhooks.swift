import Foundation
import GatehouseCore
import Hummingbird

/// The console's webhooks: the configured endpoints with their last outcome, the pending and
/// failed deliveries, redelivery.
extension ConsoleRoutes {
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
        table.add(.get, "/admin/webhooks") { request, context in
            try await routes.page(request, context) { who in
                // Each list is paged on its own: its cursor is a query parameter named for its
                // status, and each list's links keep the other list's.
                let query = request.queryDictionary
                let statuses: [(OutboxEntry.Status, String)] = [(.pending, "Waiting for delivery"), (.failed, "Failed")]
                var cursors: [OutboxEntry.Status: String] = [:]
                for (status, _) in statuses { cursors[status] = try AdminWebhookRoutes.cursor(query[status.rawValue]) }
                func link(_ status: OutboxEntry.Status, _ cursor: String?) -> String {
                    var placed = cursors
                    placed[status] = cursor
                    let pairs = statuses.compactMap { other, _ in placed[other].map { "\(other.rawValue)=\(FormEncoding.escape($0))" } }
                    return pairs.isEmpty ? "/admin/webhooks" : "/admin/webhooks?" + pairs.joined(separator: "&")
                }
                let outcomes = gatehouse.webhooks?.outcomes() ?? [:]
                let endpoints: [[String: Any]] = (gatehouse.configuration.webhooks?.endpoints ?? []).map { endpoint in
                    [
                        "name": endpoint.name, "url": Self.shown(endpoint.url),
                        "events": endpoint.events.map { $0.map(\.rawValue).sorted().joined(separator: ", ") } ?? "every event",
                        "outcome": outcomes[endpoint.name] ?? "none yet",
                    ]
                }
                var lists: [[String: Any]] = []
                for (status, heading) in statuses {
                    let page = try await AdminWebhookRoutes.page(of: gatehouse.storage, status: status, after: cursors[status])
                    var list: [String: Any] = [
                        "status": status.rawValue, "heading": heading,
                        "deliveries": page.entries.map { entry in
                            [
                                "id": entry.id, "eventId": entry.eventId, "type": entry.type, "endpoint": entry.endpoint,
                                "created": Self.date(entry.createdAt), "attempts": entry.attempts, "lastError": entry.lastError ?? "",
                            ]
                        },
                    ]
                    // Only when there is one: Mustache takes a boxed `nil` for a value.
                    if let next = page.next { list["next"] = link(status, next) }
                    if cursors[status] != nil { list["first"] = link(status, nil) }
                    lists.append(list)
                }
                return routes.views.render(
                    "webhooks", ["title": "Webhooks", "endpoints": endpoints, "lists": lists], operator: who, request: request)
            }
        }
        table.add(.post, "/admin/webhooks/deliveries/{id}/redeliver") { request, context in
            try await routes.page(request, context) { who in
                guard let who else { throw Refusal.signedOut }
                try routes.requireOwnOrigin(request)
                try await gatehouse.redeliver(try context.parameters.require("id"), by: .operator(who.profile.uid))
                return Self.done("/admin/webhooks", "redelivered")
            }
        }
    }
}
