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
            // Every key set on every row: a key a row lacks is looked up in the page's values
            // (the activity page's own `uid` filter), which would put another value in the row.
            // `linked` says whether the event is an account's (the page links it).
            [
                "at": date(record.at), "event": record.event, "actor": record.actor, "provider": record.provider ?? "", "keyId": record.keyId ?? "",
                "linked": record.uid != nil, "uid": record.uid ?? "", "uidPath": FormEncoding.escape(record.uid ?? ""),
            ]
        }
    }

    func registerActivity(into table: inout RouteTable) {
        let routes = self
        let gatehouse = self.gatehouse
        table.add(.get, "/admin/activity") { request, context in
            try await routes.page(request, context) { who in
                let query = request.queryDictionary
                let uid = query["uid"].flatMap { $0.isEmpty ? nil : $0 }
                let type = query["type"].flatMap { $0.isEmpty ? nil : $0 }
                guard (uid?.utf8.count ?? 0) <= 128, (type?.utf8.count ?? 0) <= 64 else {
                    throw GatehouseError.invalidArgument("The account is at most 128 bytes, the event at most 64.")
                }
                let page = try await gatehouse.admin.activity(uid: uid, event: type, cursor: query["cursor"], limit: Self.eventsShown)
                let filter = "uid=\(FormEncoding.escape(uid ?? ""))&type=\(FormEncoding.escape(type ?? ""))"
                var values: [String: Any] = [
                    "title": "Activity", "uid": uid ?? "", "events": Self.events(page.events),
                    "types": AuditEvent.allCases.map { ["name": $0.rawValue, "selected": $0.rawValue == type] },
                    "caption": "Newest first; events reach this list within a few seconds",
                ]
                // Only when there is one: Mustache takes a boxed `nil` for a value.
                if let cursor = page.nextCursor { values["next"] = "/admin/activity?\(filter)&cursor=\(cursor)" }
                return routes.views.render("activity", values, operator: who, request: request)
            }
        }
    }
}
