import Foundation
import GatehouseCore
import Hummingbird

/// The console's user pages: search and paging, one account (profile, photo, providers,
/// claims, sessions) and the changes operators make to it.
extension ConsoleRoutes {
    func registerUsers(into table: inout RouteTable) {
        let routes = self
        let gatehouse = self.gatehouse
        table.add(.get, "/admin/users") { request, context in
            try await routes.page(request, context) { who in
                let query = request.queryDictionary
                let text = query["query"] ?? ""
                let cursor = query["cursor"]
                // Bytes, not characters: one character may carry any number of combining marks.
                guard text.utf8.count <= 320, (cursor?.utf8.count ?? 0) <= 128, !text.unicodeScalars.contains("\0") else {
                    throw GatehouseError.invalidArgument("The search is at most 320 bytes, the cursor at most 128.")
                }
                let page = try await gatehouse.admin.search(AccountSearch(text), after: cursor, limit: Self.pageSize)
                let next = page.nextCursor.map { "/admin/users?query=\(FormEncoding.escape(text))&cursor=\(FormEncoding.escape($0))" }
                let users: [[String: Any]] = page.users.map { user in
                    [
                        "uid": user.uid, "uidPath": FormEncoding.escape(user.uid), "name": user.displayName ?? user.email ?? user.uid,
                        "email": user.email ?? "", "providers": user.providers.map(\.providerId).joined(separator: ", "),
                        "created": Self.date(user.createdAt), "lastSignIn": Self.date(user.lastSignInAt), "disabled": user.disabled,
                    ]
                }
                let caption = text.isEmpty ? "Every account, by uid" : "Accounts matching “\(text)”"
                var values: [String: Any] = ["title": "Users", "query": text, "users": users, "caption": caption]
                // Only when there is one: Mustache takes a boxed `nil` for a value.
                if let next { values["next"] = next }
                return routes.views.render("users", values, operator: who, request: request)
            }
        }
        table.add(.get, "/admin/users/{uid}") { request, context in
            try await routes.page(request, context) { who in
                let uid = try context.parameters.require("uid")
                let user = try await gatehouse.profiles.profile(uid: uid)
                let (sessions, sessionTotal) = try await gatehouse.admin.sessionsWithUses(uid: uid)
                let grants = try await gatehouse.profiles.grants(uid: uid)
                let recent = try await gatehouse.admin.activity(uid: uid, event: nil, cursor: nil, limit: 20).events
                let uidPath = FormEncoding.escape(uid)
                let claims = try JSONCoding.encoder().encode(user.customClaims)
                var values: [String: Any] = [
                    "title": user.displayName ?? uid, "uid": uid, "uidPath": uidPath, "name": user.displayName ?? user.email ?? uid,
                    "email": user.email ?? "—", "emailVerified": user.emailVerified, "created": Self.date(user.createdAt),
                    "lastSignIn": Self.date(user.lastSignInAt), "disabled": user.disabled,
                    "claims": String(decoding: claims, as: UTF8.self),
                    "providers": user.providers.map { provider in
                        let grant = grants.first { $0.providerId == provider.providerId }
                        return [
                            "providerId": provider.providerId, "providerPath": FormEncoding.escape(provider.providerId),
                            "federatedId": provider.federatedId, "email": provider.email ?? "",
                            "scopes": provider.scopes.isEmpty ? "—" : provider.scopes.joined(separator: " "),
                            "grant": grant?.condition.rawValue ?? "—", "grantExpires": grant?.expiresAt.map(Self.date) ?? "does not expire",
                        ]
                    },
                    "hasSessions": !sessions.isEmpty, "events": Self.events(recent),
                    "caption": "The account's last 20 events, newest first",
                    "sessions": sessions.map { session, use in
                        [
                            "id": session.familyId, "provider": session.signInProvider, "created": Self.date(session.createdAt),
                            "expires": Self.date(session.expiresAt), "lastUsed": use.map { Self.date($0.at) } ?? "—",
                            "client": use?.clientAddress ?? "—", "userAgent": use?.userAgent ?? "—",
                        ]
                    },
                ]
                if user.photoURL != nil { values["photo"] = "/admin/users/\(uidPath)/photo" }
                if sessionTotal > sessions.count { values["sessionsNotShown"] = "The newest \(sessions.count) of \(sessionTotal) live sessions." }
                return routes.views.render("user", values, operator: who, request: request)
            }
        }
        table.add(.get, "/admin/users/{uid}/photo") { request, context in
            try await routes.page(request, context) { _ in
                var photo = try await ProfileResponses.photo(
                    request, query: request.queryDictionary, eventLoop: context.eventLoop, profiles: gatehouse.profiles,
                    uid: try context.parameters.require("uid"))
                // The console runs on shared machines: nothing of it stays in the browser's cache.
                photo.headers[.cacheControl] = "no-store"
                return photo
            }
        }
        /// A change to one account: the operator, checked for a destructive change, and the uid.
        @Sendable func change(
            _ request: Request, _ context: GatehouseRequestContext, _ body: (Operator, String) async throws -> Response
        ) async throws -> Response {
            try await routes.page(request, context) { who in
                guard let who else { throw Refusal.signedOut }
                try routes.requireDestructive(request, who)
                return try await body(who, try context.parameters.require("uid"))
            }
        }
        table.add(.post, "/admin/users/{uid}/disable") { request, context in
            try await change(request, context) { who, uid in
                try await gatehouse.admin.setDisabled(uid: uid, disabled: true, by: .operator(who.profile.uid))
                return Self.done("/admin/users/\(FormEncoding.escape(uid))", "disabled")
            }
        }
        table.add(.post, "/admin/users/{uid}/enable") { request, context in
            try await change(request, context) { who, uid in
                try await gatehouse.admin.setDisabled(uid: uid, disabled: false, by: .operator(who.profile.uid))
                return Self.done("/admin/users/\(FormEncoding.escape(uid))", "enabled")
            }
        }
        table.add(.post, "/admin/users/{uid}/claims") { request, context in
            try await change(request, context) { who, uid in
                let text = try await Self.form(request)["claims"]?.first ?? ""
                guard let value = try? JSONValue.parse(Data(text.utf8)), case .object(let members) = value
                else { throw GatehouseError.invalidArgument("The claims must be a JSON object ({} clears them).") }
                try await gatehouse.accounts.setCustomClaims(
                    uid: uid, try CustomClaims(members, source: "The claims"), by: .operator(who.profile.uid), mayChangeOperatorClaim: true)
                return Self.done("/admin/users/\(FormEncoding.escape(uid))", "claims-saved")
            }
        }
        table.add(.post, "/admin/users/{uid}/sessions/{sessionId}/revoke") { request, context in
            try await change(request, context) { who, uid in
                try await gatehouse.admin.revokeSession(
                    uid: uid, sessionId: try context.parameters.require("sessionId"), by: .operator(who.profile.uid))
                return Self.done("/admin/users/\(FormEncoding.escape(uid))", "session-revoked")
            }
        }
        table.add(.post, "/admin/users/{uid}/sessions/revoke-all") { request, context in
            try await change(request, context) { who, uid in
                try await gatehouse.admin.revokeSessions(uid: uid, by: .operator(who.profile.uid))
                return Self.done("/admin/users/\(FormEncoding.escape(uid))", "sessions-revoked")
            }
        }
        table.add(.post, "/admin/users/{uid}/providers/{providerId}/unlink") { request, context in
            try await change(request, context) { who, uid in
                _ = try await gatehouse.accounts.unlink(
                    uid: uid, providerId: try context.parameters.require("providerId"), providers: gatehouse.providers,
                    by: .operator(who.profile.uid))
                return Self.done("/admin/users/\(FormEncoding.escape(uid))", "unlinked")
            }
        }
        table.add(.post, "/admin/users/{uid}/delete") { request, context in
            try await change(request, context) { who, uid in
                // A typed confirmation: the uid itself, so a stray click deletes nothing.
                guard try await Self.form(request)["confirm"]?.first == uid else {
                    throw GatehouseError.invalidArgument("Type the account's uid to confirm its deletion.")
                }
                try await gatehouse.accounts.delete(uid: uid, providers: gatehouse.providers, by: .operator(who.profile.uid))
                return Self.done("/admin/users", "deleted")
            }
        }
    }
}
