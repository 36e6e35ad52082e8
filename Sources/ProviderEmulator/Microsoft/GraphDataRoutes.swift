import Foundation
import Hummingbird

/// Graph data beyond the profile, for the gateway's passthrough (providers.md §2): the
/// signed-in user's calendar events and mail messages, paged with `$top` / `$skip` and
/// `@odata.nextLink` as Graph pages, each behind its delegated permission.
struct GraphDataRoutes {
    /// Graph's token check.
    let graph: GraphRoutes

    /// Items per seeded user: enough for several pages at Graph's default page size of 10.
    static let itemCount = 25

    /// Adds events, messages and one message.
    func register(on router: Router<BasicRequestContext>) {
        router.get("/graph/v1.0/me/events") { request, _ in
            await graph.authorized(request) { user, token in
                guard Self.granted(token, any: ["Calendars.Read", "Calendars.ReadWrite"]) else { return Self.accessDenied() }
                return Self.page(request, collection: "events", items: (1...Self.itemCount).map { Self.event(user, $0) })
            }
        }
        router.get("/graph/v1.0/me/messages") { request, _ in
            await graph.authorized(request) { user, token in
                guard Self.granted(token, any: ["Mail.Read", "Mail.ReadWrite"]) else { return Self.accessDenied() }
                return Self.page(request, collection: "messages", items: (1...Self.itemCount).map { Self.message(user, $0) })
            }
        }
        router.get("/graph/v1.0/me/messages/:id") { request, context in
            await graph.authorized(request) { user, token in
                guard Self.granted(token, any: ["Mail.Read", "Mail.ReadWrite"]) else { return Self.accessDenied() }
                let id = context.parameters.get("id") ?? ""
                guard let index = (1...Self.itemCount).first(where: { Self.messageID(user, $0) == id }) else {
                    return MicrosoftErrors.graph("ErrorItemNotFound", "The specified object was not found in the store.", status: .notFound)
                }
                return Response.json(Self.message(user, index))
            }
        }
    }

    /// Whether the token holds one of the permissions (as `Mail.Read` or its resource URI form).
    static func granted(_ token: MicrosoftToken, any permissions: [String]) -> Bool {
        token.scopes.contains { scope in
            permissions.contains { scope.caseInsensitiveCompare($0) == .orderedSame || scope.lowercased().hasSuffix("/" + $0.lowercased()) }
        }
    }

    /// Graph's answer to a call the token's permissions do not cover.
    static func accessDenied() -> Response {
        MicrosoftErrors.graph("ErrorAccessDenied", "Access is denied. Check credentials and try again.", status: .forbidden)
    }

    /// One page of a collection: `$top` items (default 10, at most 1000) from `$skip`, with an
    /// `@odata.nextLink` carrying both while items remain.
    static func page(_ request: Request, collection: String, items: [[String: Any]]) -> Response {
        let query = request.formQuery
        guard let top = Int(query["$top"] ?? "10"), (1...1000).contains(top), let skip = Int(query["$skip"] ?? "0"), skip >= 0 else {
            return MicrosoftErrors.graph("BadRequest", "Invalid $top or $skip.", status: .badRequest)
        }
        let slice = Array(items.dropFirst(skip).prefix(top))
        var body: [String: Any] = ["@odata.context": "https://graph.microsoft.com/v1.0/$metadata#users('me')/\(collection)", "value": slice]
        if skip + top < items.count {
            body["@odata.nextLink"] = "http://\(request.head.authority ?? "127.0.0.1")/graph/v1.0/me/\(collection)?$top=\(top)&$skip=\(skip + top)"
        }
        return Response.json(body)
    }

    /// The seeded event `index` of `user`.
    static func event(_ user: MicrosoftSeedUser, _ index: Int) -> [String: Any] {
        let day = String(format: "2026-12-%02d", (index - 1) % 28 + 1)
        return [
            "id": "AAMkEvt-\(user.hint.hashValueStable)-\(index)", "subject": "Meeting \(index)",
            "start": ["dateTime": "\(day)T09:00:00.0000000", "timeZone": "UTC"], "end": ["dateTime": "\(day)T09:30:00.0000000", "timeZone": "UTC"],
            "organizer": ["emailAddress": ["name": user.displayName, "address": user.userPrincipalName]],
        ]
    }

    /// The id of the seeded message `index` of `user` (stable between runs).
    static func messageID(_ user: MicrosoftSeedUser, _ index: Int) -> String {
        "AAMkMsg-\(user.hint.hashValueStable)-\(index)"
    }

    /// The seeded message `index` of `user`.
    static func message(_ user: MicrosoftSeedUser, _ index: Int) -> [String: Any] {
        [
            "id": messageID(user, index), "subject": "Message \(index)", "isRead": index % 2 == 0,
            "receivedDateTime": String(format: "2026-11-%02dT08:00:00Z", (index - 1) % 28 + 1),
            "from": ["emailAddress": ["name": "Contoso Team", "address": "team@contoso.example"]],
            "toRecipients": [["emailAddress": ["name": user.displayName, "address": user.userPrincipalName]]],
        ]
    }
}

extension String {
    /// A short, stable hash of the text (item ids that do not change between runs).
    var hashValueStable: String {
        String(utf8.reduce(UInt32(2166136261)) { ($0 ^ UInt32($1)) &* 16777619 }, radix: 16)
    }
}
