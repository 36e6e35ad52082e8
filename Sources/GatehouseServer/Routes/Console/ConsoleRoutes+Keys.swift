import Foundation
import GatehouseCore
import Hummingbird

/// The console's service keys: the active keys, a new key (its secret shown once), revocation.
extension ConsoleRoutes {
    /// The scopes the creation form offers: the fixed ones and each provider's `api:` and `tokens:`.
    var offeredScopes: [String] {
        ServiceKeyService.knownScopes.sorted()
            + gatehouse.providers.ids.flatMap { id in ServiceKeyService.providerScopePrefixes.map { $0 + id } }
    }

    func registerKeys(into table: inout RouteTable) {
        let routes = self
        let keys = gatehouse.serviceKeys
        @Sendable func keysPage(_ request: Request, _ who: Operator?, created: (name: String, secret: String)? = nil) async throws -> Response {
            let uses = try await keys.lastUses()
            let list: [[String: Any]] = try await keys.list().filter { $0.revokedAt == nil }.map { key in
                [
                    "id": key.id, "name": key.name, "scopes": key.scopes.joined(separator: " "), "created": Self.date(key.createdAt),
                    "lastUsed": uses[key.id].map(Self.date) ?? "never",
                ]
            }
            var values: [String: Any] = ["title": "Service keys", "keys": list, "scopes": routes.offeredScopes]
            if let created { values["created"] = ["name": created.name, "secret": created.secret] }
            return routes.views.render("keys", values, operator: who, request: request)
        }
        table.add(.get, "/admin/keys") { request, context in
            try await routes.page(request, context) { who in try await keysPage(request, who) }
        }
        table.add(.post, "/admin/keys") { request, context in
            try await routes.page(request, context) { who in
                guard let who else { throw Refusal.signedOut }
                try routes.requireDestructive(request, who)
                let form = try await Self.form(request)
                let name = form["name"]?.first ?? ""
                let created = try await keys.create(name: name, scopes: form["scope"] ?? [], by: .operator(who.profile.uid))
                // The secret is in this answer only: never stored, never cached.
                var response = try await keysPage(request, who, created: (created.key.name, created.secret))
                response.status = .created
                return response
            }
        }
        table.add(.post, "/admin/keys/{id}/revoke") { request, context in
            try await routes.page(request, context) { who in
                guard let who else { throw Refusal.signedOut }
                try routes.requireDestructive(request, who)
                let id = try context.parameters.require("id")
                guard id.utf8.count <= 64, try await keys.revoke(id: id, by: .operator(who.profile.uid)) else {
                    throw GatehouseError(code: .notFound, detail: "There is no active service key with this id.")
                }
                return Self.done("/admin/keys", "key-revoked")
            }
        }
    }
}
