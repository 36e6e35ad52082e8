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
        // Compared without adding: a `$skip` near the integer limit pages past the end.
        if skip < items.count, top < items.count - skip {
            body["@odata.nextLink"] = "http://\(request.head.authority ?? "127.0.0.1")/graph/v1.0/me/\(collection)?$top=\(top)&$skip=\(skip + top)"
        }
        return Response.json(body)
    }

    /// The seeded event `index` of `user`, with the members Graph's `GET /me/events` answers
    /// by default (the `event` type of Graph's metadata; the conformance test holds it to them).
    static func event(_ user: MicrosoftSeedUser, _ index: Int) -> [String: Any] {
        let day = String(format: "2026-12-%02d", (index - 1) % 28 + 1)
        let id = "AAMkEvt-\(user.hint.hashValueStable)-\(index)"
        let null = NSNullValue.null
        let organizer: [String: Any] = ["emailAddress": ["name": user.displayName, "address": user.userPrincipalName]]
        let room: [String: Any] = [
            "displayName": "Room \(index % 4 + 1)", "locationType": "default", "uniqueId": "Room \(index % 4 + 1)", "uniqueIdType": "private",
        ]
        return [
            "@odata.etag": "W/\"DwAAABYAAAB\(index)\"", "id": id, "createdDateTime": "2026-11-01T08:00:00.0000000Z",
            "lastModifiedDateTime": "2026-11-02T08:00:00.0000000Z", "changeKey": "DwAAABYAAAB\(index)", "categories": [String](),
            "transactionId": null, "originalStartTimeZone": "UTC", "originalEndTimeZone": "UTC", "iCalUId": "040000008200E0-\(id)",
            "reminderMinutesBeforeStart": 15, "isReminderOn": true, "hasAttachments": false,
            "subject": "Meeting \(index)", "bodyPreview": "Agenda for meeting \(index)", "importance": "normal", "sensitivity": "normal",
            "isAllDay": false, "isCancelled": false, "isOrganizer": true, "responseRequested": true, "seriesMasterId": null, "showAs": "busy",
            "type": "singleInstance", "webLink": "https://outlook.office365.com/owa/?itemid=\(id)&exvsurl=1&path=/calendar/item",
            "onlineMeetingUrl": null, "isOnlineMeeting": false, "onlineMeetingProvider": "unknown", "allowNewTimeProposals": true,
            "isDraft": false, "hideAttendees": false,
            "responseStatus": ["response": "organizer", "time": "0001-01-01T00:00:00Z"],
            "body": ["contentType": "html", "content": "<html><body><p>Agenda for meeting \(index)</p></body></html>"],
            "start": ["dateTime": "\(day)T09:00:00.0000000", "timeZone": "UTC"], "end": ["dateTime": "\(day)T09:30:00.0000000", "timeZone": "UTC"],
            "location": room, "locations": [room], "recurrence": null, "attendees": [[String: Any]](), "organizer": organizer,
            "onlineMeeting": null,
        ]
    }

    /// The id of the seeded message `index` of `user` (stable between runs).
    static func messageID(_ user: MicrosoftSeedUser, _ index: Int) -> String {
        "AAMkMsg-\(user.hint.hashValueStable)-\(index)"
    }

    /// The seeded message `index` of `user`, with the members Graph's `GET /me/messages`
    /// answers by default (the `message` type of Graph's metadata).
    static func message(_ user: MicrosoftSeedUser, _ index: Int) -> [String: Any] {
        let received = String(format: "2026-11-%02dT08:00:00Z", (index - 1) % 28 + 1)
        let team: [String: Any] = ["emailAddress": ["name": "Contoso Team", "address": "team@contoso.example"]]
        let id = messageID(user, index)
        return [
            "@odata.etag": "W/\"CQAAABYAAAB\(index)\"", "id": id, "createdDateTime": received, "lastModifiedDateTime": received,
            "changeKey": "CQAAABYAAAB\(index)", "categories": [String](), "receivedDateTime": received, "sentDateTime": received,
            "hasAttachments": false, "internetMessageId": "<\(id)@contoso.example>", "subject": "Message \(index)",
            "bodyPreview": "Hello from message \(index)", "importance": "normal", "parentFolderId": "AAMkInbox",
            "conversationId": "AAQkConv-\(index)",
            "conversationIndex": "AQHZ\(index)", "isDeliveryReceiptRequested": false, "isReadReceiptRequested": false, "isRead": index % 2 == 0,
            "isDraft": false, "webLink": "https://outlook.office365.com/owa/?ItemID=\(id)&exvsurl=1&viewmodel=ReadMessageItem",
            "inferenceClassification": "focused", "body": ["contentType": "text", "content": "Hello from message \(index)"],
            "sender": team, "from": team,
            "toRecipients": [["emailAddress": ["name": user.displayName, "address": user.userPrincipalName]]],
            "ccRecipients": [[String: Any]](), "bccRecipients": [[String: Any]](), "replyTo": [[String: Any]](),
            "flag": ["flagStatus": "notFlagged"],
        ]
    }
}

extension String {
    /// A short, stable hash of the text (item ids that do not change between runs).
    var hashValueStable: String {
        String(utf8.reduce(UInt32(2166136261)) { ($0 ^ UInt32($1)) &* 16777619 }, radix: 16)
    }
}
