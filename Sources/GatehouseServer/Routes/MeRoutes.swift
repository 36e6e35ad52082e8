import GatehouseCore
import HTTPTypes
import Hummingbird

/// `/v1/me…`: the signed-in user's unified profile, provider profile and photo, unlink and
/// account deletion; the session cookie or `Authorization: Bearer <gateway ID token>`.
struct MeRoutes {
    let gatehouse: Gatehouse
    let browser: BrowserPolicy

    func register(into table: inout RouteTable) {
        let cookies = CookiePolicy(gatehouse.configuration)
        let sessions = gatehouse.sessions
        let profiles = gatehouse.profiles
        let accounts = gatehouse.accounts
        let providers = gatehouse.providers
        let browser = self.browser
        let answers = EncodedAnswers<UnifiedProfile>(capacity: 4096)
        let providerAnswers = EncodedAnswers<ProviderProfileView>(capacity: 4096)

        /// The signed-in user, within the per-user rate limit.
        @Sendable func caller(_ context: GatehouseRequestContext) async throws -> SessionService.Caller {
            let caller = try await context.requireUser()
            try await browser.limit(user: caller.uid)
            return caller
        }
        @Sendable func signedIn(_ context: GatehouseRequestContext) async throws -> String {
            try await caller(context).uid
        }
        /// Unlink and delete: an allowed origin for cookie callers, and a recent sign-in.
        @Sendable func sensitive(_ request: Request, _ context: GatehouseRequestContext) async throws -> SessionService.Caller {
            let caller = try await caller(context)
            try browser.requireAllowedOrigin(request, caller: caller)
            try sessions.requireRecentLogin(caller)
            return caller
        }

        table.add(.get, "/v1/me") { request, context in
            let uid = try await signedIn(context)
            return try answers.response(try await profiles.me(uid: uid), key: uid)
        }

        table.add(.delete, "/v1/me") { request, context in
            let caller = try await sensitive(request, context)
            try await accounts.delete(uid: caller.uid, providers: providers)
            var response = Response(status: .noContent, headers: [.cacheControl: "no-store"])
            if caller.viaCookie {
                response.headers.append(HTTPField(name: .setCookie, value: cookies.deleteCookie(name: cookies.sessionName)))
            }
            return response
        }

        table.add(.delete, "/v1/me/providers/{providerId}") { request, context in
            let caller = try await sensitive(request, context)
            return try Response.json(
                try await accounts.unlink(
                    uid: caller.uid, providerId: try context.parameters.require("providerId"), providers: providers, sparing: caller.familyId))
        }

        table.add(.get, "/v1/me/providers/{providerId}/profile") { request, context in
            let uid = try await signedIn(context)
            let profile = try await profiles.providerProfile(
                uid: uid, providerId: try context.parameters.require("providerId"), refresh: try Self.refresh(request.queryDictionary))
            return try ProfileResponses.profile(profile, answers: providerAnswers)
        }

        table.add(.get, "/v1/me/photo") { request, context in
            let query = request.queryDictionary
            return try await ProfileResponses.photo(
                request, query: query, eventLoop: context.eventLoop, profiles: profiles, uid: try await signedIn(context),
                refresh: try Self.refresh(query))
        }
    }

    /// `?refresh=true` bypasses the profile and photo caches (the user's own routes only).
    static func refresh(_ query: [String: String]) throws -> Bool {
        switch query["refresh"] {
        case nil, "false": return false
        case "true": return true
        default: throw GatehouseError.invalidArgument("refresh must be true or false.")
        }
    }
}
