import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird

/// `/v1/users/…`: profiles and photos by user id for internal services, and the admin
/// operations; every route needs a service key with the route's scope.
struct ServiceRoutes {
    let gatehouse: Gatehouse
    let browser: BrowserPolicy

    func register(into table: inout RouteTable) {
        let profiles = gatehouse.profiles
        let admin = gatehouse.admin
        let browser = self.browser
        let answers = EncodedAnswers<UnifiedProfile>(capacity: 4096)
        let providerAnswers = EncodedAnswers<ProviderProfileView>(capacity: 4096)

        @Sendable func uid(_ context: GatehouseRequestContext, scope: String) async throws -> String {
            _ = try await browser.serviceKey(context, scope: scope)
            return try context.parameters.require("uid")
        }

        table.add(.get, "/v1/users") { request, context in
            _ = try await browser.serviceKey(context, scope: "admin:users")
            guard let email = request.queryDictionary["email"] else { throw GatehouseError.invalidArgument("email is required.") }
            let includeUnverified: Bool
            switch request.queryDictionary["includeUnverified"] {
            case nil, "false": includeUnverified = false
            case "true": includeUnverified = true
            default: throw GatehouseError.invalidArgument("includeUnverified must be true or false.")
            }
            return try Response.json(UserList(users: try await admin.lookup(email: email, includeUnverified: includeUnverified)))
        }
        table.add(.get, "/v1/users/{uid}") { request, context in
            let user = try await uid(context, scope: "profile:read")
            return try answers.response(try await profiles.profile(uid: user), key: user)
        }
        table.add(.get, "/v1/users/{uid}/photo") { request, context in
            try await ProfileResponses.photo(
                request, query: request.queryDictionary, eventLoop: context.eventLoop, profiles: profiles,
                uid: try await uid(context, scope: "photo:read"))
        }
        table.add(.get, "/v1/users/{uid}/providers/{providerId}/profile") { request, context in
            let user = try await uid(context, scope: "profile:read")
            return try ProfileResponses.profile(
                try await profiles.providerProfile(uid: user, providerId: try context.parameters.require("providerId")), answers: providerAnswers)
        }
        /// An administrator's write: the target uid and the key that makes it (the audit's actor).
        @Sendable func adminWrite(_ context: GatehouseRequestContext) async throws -> (uid: String, actor: AuditActor) {
            let key = try await browser.serviceKey(context, scope: "admin:users")
            return (try context.parameters.require("uid"), .serviceKey(key.id))
        }
        // The whole object is replaced (`{}` clears); every gateway ID token minted afterwards
        // carries it, on every instance, a refresh included.
        let accounts = gatehouse.accounts
        table.add(.put, "/v1/users/{uid}/claims") { request, context in
            let key = try await browser.serviceKey(context, scope: "users:claims")
            let user = try context.parameters.require("uid")
            var request = request
            guard request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
                throw GatehouseError.invalidArgument("The body must be application/json.")
            }
            let body = try await request.collectBody(upTo: 16 << 10)
            guard let value = try? JSONValue.parse(Data(buffer: body)), case .object(let members) = value
            else { throw GatehouseError.invalidArgument("The body must be a JSON object of claims.") }
            let claims = try CustomClaims(members, source: "The claims")
            try await accounts.setCustomClaims(
                uid: user, claims, by: .serviceKey(key.id), mayChangeOperatorClaim: key.scopes.contains("admin"))
            return try Response.json(ClaimsAnswer(customClaims: claims.members))
        }
        table.add(.post, "/v1/users/{uid}/disable") { request, context in
            let (user, actor) = try await adminWrite(context)
            try await admin.setDisabled(uid: user, disabled: true, by: actor)
            return Response(status: .noContent)
        }
        table.add(.post, "/v1/users/{uid}/enable") { request, context in
            let (user, actor) = try await adminWrite(context)
            try await admin.setDisabled(uid: user, disabled: false, by: actor)
            return Response(status: .noContent)
        }
        table.add(.post, "/v1/users/{uid}/revoke-sessions") { request, context in
            let (user, actor) = try await adminWrite(context)
            try await admin.revokeSessions(uid: user, by: actor)
            return Response(status: .noContent)
        }
    }

    /// `PUT /v1/users/{uid}/claims`: the claims as stored.
    struct ClaimsAnswer: Encodable {
        let customClaims: [String: JSONValue]
    }

    /// `GET /v1/users?email=`.
    struct UserList: Encodable {
        let users: [EmailMatch]
    }
}
