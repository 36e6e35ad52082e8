import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird

/// `/v1/admin/…`: the operators' account and key routes, each a documented service-key route
/// (scope `admin:users` or `admin:keys`; `admin` covers both): user search and paging, an
/// account's sessions and their revocation, unlink and delete, service keys over HTTP. Every
/// change is an audit event naming the key that made it.
struct AdminRoutes {
    let gatehouse: Gatehouse
    let browser: BrowserPolicy

    /// Accounts per page.
    static let pageSize = 50

    func register(into table: inout RouteTable) {
        let admin = gatehouse.admin
        let accounts = gatehouse.accounts
        let providers = gatehouse.providers
        let serviceKeys = gatehouse.serviceKeys
        let browser = self.browser
        /// The key, authorized for `scope` and within its rate limit; the audit's actor.
        @Sendable func authorize(_ context: GatehouseRequestContext, scope: String) async throws -> AuditActor {
            .serviceKey(try await browser.serviceKey(context, scope: scope).id)
        }
        /// NUL is no character of a uid, an email or a name (and PostgreSQL refuses it in text).
        /// The bound is in bytes: one character may carry any number of combining marks.
        @Sendable func text(_ value: String?, max: Int, _ name: String) throws -> String? {
            guard let value else { return nil }
            guard value.utf8.count <= max, !value.unicodeScalars.contains("\0") else {
                throw GatehouseError.invalidArgument("\(name) is at most \(max) bytes, without NUL.")
            }
            return value
        }

        table.add(.get, "/v1/admin/users") { request, context in
            _ = try await authorize(context, scope: "admin:users")
            let query = request.queryDictionary
            let page = try await admin.search(
                AccountSearch(try text(query["query"], max: 320, "query")), after: try text(query["cursor"], max: 128, "cursor"),
                limit: Self.pageSize)
            return try Response.json(UserPage(users: page.users, nextCursor: page.nextCursor))
        }
        table.add(.get, "/v1/admin/users/{uid}/sessions") { request, context in
            _ = try await authorize(context, scope: "admin:users")
            let listing = try await admin.sessionsWithUses(uid: try context.parameters.require("uid"))
            return try Response.json(SessionList(sessions: listing.sessions.map { SessionView($0.session, use: $0.use) }, total: listing.total))
        }
        table.add(.delete, "/v1/admin/users/{uid}/sessions") { request, context in
            let actor = try await authorize(context, scope: "admin:users")
            try await admin.revokeSessions(uid: try context.parameters.require("uid"), by: actor)
            return Response(status: .noContent)
        }
        table.add(.delete, "/v1/admin/users/{uid}/sessions/{sessionId}") { request, context in
            let actor = try await authorize(context, scope: "admin:users")
            try await admin.revokeSession(
                uid: try context.parameters.require("uid"), sessionId: try context.parameters.require("sessionId"), by: actor)
            return Response(status: .noContent)
        }
        table.add(.delete, "/v1/admin/users/{uid}/providers/{providerId}") { request, context in
            let actor = try await authorize(context, scope: "admin:users")
            let profile = try await accounts.unlink(
                uid: try context.parameters.require("uid"), providerId: try context.parameters.require("providerId"), providers: providers,
                by: actor)
            return try Response.json(["user": profile])
        }
        table.add(.delete, "/v1/admin/users/{uid}") { request, context in
            let actor = try await authorize(context, scope: "admin:users")
            try await accounts.delete(uid: try context.parameters.require("uid"), providers: providers, by: actor)
            return Response(status: .noContent)
        }

        table.add(.get, "/v1/admin/activity") { request, context in
            // Key and webhook administration is listed to keys holding those scopes.
            let scopes = try await browser.serviceKey(context, scope: "admin:users").scopes
            let query = request.queryDictionary
            let page = try await admin.activity(
                uid: try text(query["uid"], max: 128, "uid"), event: try text(query["type"], max: 64, "type"), cursor: query["cursor"],
                limit: Self.activityPageSize, listable: { AuditEvent.listable($0, by: scopes) })
            return try Response.json(ActivityPage(events: page.events.map(ActivityEvent.init), nextCursor: page.nextCursor))
        }
        table.add(.get, "/v1/admin/keys") { request, context in
            _ = try await authorize(context, scope: "admin:keys")
            let uses = try await serviceKeys.lastUses()
            return try Response.json(KeyList(keys: try await serviceKeys.list().map { KeyView($0, lastUsedAt: uses[$0.id]) }))
        }
        table.add(.post, "/v1/admin/keys") { request, context in
            let caller = try await browser.serviceKey(context, scope: "admin:keys")
            let object = try await AuthRoutes.jsonObject(request, limit: 8 << 10)
            guard let name = object["name"] as? String, let scopes = object["scopes"] as? [String] else {
                throw GatehouseError.invalidArgument("The body must be a JSON object with a string name and an array of string scopes.")
            }
            // No escalation: a key hands out only scopes it holds.
            guard ServiceKeyService.covers(caller.scopes, scopes) else {
                throw GatehouseError(
                    code: .permissionDenied, detail: "A key can only create keys with scopes it holds itself (admin counts for every admin: scope).")
            }
            let created = try await serviceKeys.create(name: name, scopes: scopes, by: .serviceKey(caller.id))
            var response = try Response.json(CreatedKey(key: KeyView(created.key), secret: created.secret), status: .created)
            response.headers[.cacheControl] = "no-store"
            return response
        }
        table.add(.delete, "/v1/admin/keys/{id}") { request, context in
            let caller = try await browser.serviceKey(context, scope: "admin:keys")
            let id = try context.parameters.require("id")
            // A key takes back only keys no stronger than itself.
            if let target = try await serviceKeys.list().first(where: { $0.id == id }), !ServiceKeyService.covers(caller.scopes, target.scopes) {
                throw GatehouseError(code: .permissionDenied, detail: "A key can only revoke keys whose scopes it holds itself.")
            }
            guard id.utf8.count <= 64, try await serviceKeys.revoke(id: id, by: .serviceKey(caller.id)) else {
                throw GatehouseError(code: .notFound, detail: "There is no active service key with this id.")
            }
            return Response(status: .noContent)
        }
    }

    /// Events per activity page.
    static let activityPageSize = 100

    /// A page of stored audit events.
    struct ActivityPage: Encodable {
        let events: [ActivityEvent]
        let nextCursor: String?

        enum CodingKeys: String, CodingKey { case events, nextCursor }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(events, forKey: .events)
            try c.encode(nextCursor, forKey: .nextCursor)
        }
    }

    /// One stored audit event (`null` for what it does not concern).
    struct ActivityEvent: Encodable {
        let record: AuditRecord

        init(_ record: AuditRecord) { self.record = record }

        enum CodingKeys: String, CodingKey { case id, at, event, actor, uid, provider, keyId }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(String(record.id), forKey: .id)
            try c.encode(record.at, forKey: .at)
            try c.encode(record.event, forKey: .event)
            try c.encode(record.actor, forKey: .actor)
            try c.encode(record.uid, forKey: .uid)
            try c.encode(record.provider, forKey: .provider)
            try c.encode(record.keyId, forKey: .keyId)
        }
    }

    /// A page of accounts.
    struct UserPage: Encodable {
        let users: [UnifiedProfile]
        let nextCursor: String?

        enum CodingKeys: String, CodingKey { case users, nextCursor }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(users, forKey: .users)
            try c.encode(nextCursor, forKey: .nextCursor)
        }
    }

    /// An account's live sessions.
    struct SessionList: Encodable {
        /// The newest 100 at most.
        let sessions: [SessionView]
        /// How many live sessions the account has.
        let total: Int
    }

    /// One session as operators see it (never its cookie or tokens), with its last recorded
    /// use (`null` members when none was recorded).
    struct SessionView: Encodable {
        /// The session's id (`sid` in its ID tokens).
        let id: String
        let createdAt: Date
        let expiresAt: Date
        let signInProvider: String
        let use: SessionUse?

        init(_ session: SessionRecord, use: SessionUse?) {
            id = session.familyId
            createdAt = session.createdAt
            expiresAt = session.expiresAt
            signInProvider = session.signInProvider
            self.use = use
        }

        enum CodingKeys: String, CodingKey { case id, createdAt, expiresAt, signInProvider, lastUsedAt, clientAddress, userAgent }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(createdAt, forKey: .createdAt)
            try c.encode(expiresAt, forKey: .expiresAt)
            try c.encode(signInProvider, forKey: .signInProvider)
            try c.encode(use?.at, forKey: .lastUsedAt)
            try c.encode(use?.clientAddress, forKey: .clientAddress)
            try c.encode(use?.userAgent, forKey: .userAgent)
        }
    }

    /// Service keys.
    struct KeyList: Encodable {
        let keys: [KeyView]
    }

    /// A new key and its secret (shown once).
    struct CreatedKey: Encodable {
        let key: KeyView
        let secret: String
    }

    /// A key as listed (never its secret or hash).
    struct KeyView: Encodable {
        let id: String
        let name: String
        let scopes: [String]
        let createdAt: Date
        let revokedAt: Date?
        /// Its last recorded use (at most a minute behind), `null` if none.
        let lastUsedAt: Date?

        init(_ key: ServiceKeyRecord, lastUsedAt: Date? = nil) {
            id = key.id
            name = key.name
            scopes = key.scopes
            createdAt = key.createdAt
            revokedAt = key.revokedAt
            self.lastUsedAt = lastUsedAt
        }

        enum CodingKeys: String, CodingKey { case id, name, scopes, createdAt, revokedAt, lastUsedAt }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(name, forKey: .name)
            try c.encode(scopes, forKey: .scopes)
            try c.encode(createdAt, forKey: .createdAt)
            try c.encode(revokedAt, forKey: .revokedAt)
            try c.encode(lastUsedAt, forKey: .lastUsedAt)
        }
    }
}
