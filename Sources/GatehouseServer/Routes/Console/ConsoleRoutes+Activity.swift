import Foundation
import GatehouseCore
import Hummingbird

/// The console's activity page: the stored audit events, filtered by account and event.
extension ConsoleRoutes {
    /// Events per page.
    static let eventsShown = 100

    /// The template values of audit events.
    static func events(_ records: [AuditRecord]) -> [[String: Any]] {
        records.map { record in
            [
                "at": date(record.at), "event": record.event, "actor": record.actor, "uid": record.uid ?? "",
                "uidPath": FormEncoding.escape(record.uid ?? ""), "provider": record.provider ?? "", "keyId": record.keyId ?? "",
            ]
        }
    }

    func registerActivity(into table: inout RouteTable) {
        let routes = self
        let gatehouse = self.gatehouse
        table.add(.get, "/admin/activity") { request, _ in
            try await routes.page(request) { who in
                let query = request.queryDictionary
                let uid = query["uid"].flatMap { $0.isEmpty ? nil : $0 }
                let type = query["type"].flatMap { $0.isEmpty ? nil : $0 }
                guard (uid?.count ?? 0) <= 128, (type?.count ?? 0) <= 64 else {
                    throw GatehouseError.invalidArgument("The account is at most 128 characters, the event at most 64.")
                }
                let page = try await gatehouse.admin.activity(uid: uid, event: type, cursor: query["cursor"], limit: Self.eventsShown)
                let filter = "uid=\(FormEncoding.escape(uid ?? ""))&type=\(FormEncoding.escape(type ?? ""))"
                let values: [String: Any] = [
                    "title": "Activity", "uid": uid ?? "", "events": Self.events(page.events),
                    "types": AuditEvent.allCases.map { ["name": $0.rawValue, "selected": $0.rawValue == type] },
                    "caption": "Newest first; events reach this list within a few seconds",
                    "next": page.nextCursor.map { "/admin/activity?\(filter)&cursor=\($0)" } as Any,
                ]
                return routes.views.render("activity", values, operator: who, request: request)
            }
        }
    }
}
