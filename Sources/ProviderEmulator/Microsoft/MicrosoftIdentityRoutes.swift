import Foundation
import HTTPTypes
import Hummingbird

/// The Microsoft identity platform v2.0 under `/microsoft/{tenant}` (providers.md §1):
/// per-tenant discovery with the real issuer quirks, JWKS with per-key issuers, authorize
/// (query and form_post) and token (authorization_code, refresh_token).
struct MicrosoftIdentityRoutes {
    let clients: [ClientRegistration]
    let state: MicrosoftState
    let tamper: OIDCState
    let keys: SigningKeys
    let codeLifetime: Duration

    /// The signing-key slot of the emulated Microsoft (RS256).
    static let keySpec = OIDCIssuerSpec(
        name: "microsoft", providerId: "microsoft.com", prefix: "/microsoft", authorizePath: "", tokenPath: "", userinfoPath: "",
        jwksPath: "", algorithm: "RS256", issParameter: false, yahooErrors: false)

    /// The slot of the key Microsoft's common JWKS publishes for the personal-accounts tenant
    /// only (its `issuer` names that tenant, not `{tenantid}`).
    static let consumerKeySpec = OIDCIssuerSpec(
        name: "microsoft-consumers", providerId: "microsoft.com", prefix: "/microsoft", authorizePath: "", tokenPath: "", userinfoPath: "",
        jwksPath: "", algorithm: "RS256", issParameter: false, yahooErrors: false)

    /// The personal-accounts tenant's id (Microsoft's, for consumer accounts).
    static let consumerTenantID = "9188040d-6c67-4c5b-b112-36a304b66dad"

    func register(on router: Router<BasicRequestContext>) {
        router.get("/microsoft/:tenant/v2.0/.well-known/openid-configuration") { request, context in
            guard let tenant = context.parameters.get("tenant"), let audience = MicrosoftDirectory.audience(tenant) else {
                return MicrosoftErrors.token("invalid_tenant", 90002, "Tenant not found. Check to make sure you have the correct tenant ID.")
            }
            return discovery(tenant: tenant, audience: audience, base: request.baseURL)
        }
        router.get("/microsoft/:tenant/discovery/v2.0/keys") { request, context in
            // As Microsoft's: every key says which issuer it signs for, most for any tenant's,
            // and none names its algorithm (`alg` is not among the members Microsoft publishes:
            // a verifier takes RS256 for its RSA keys).
            func published(_ key: [String: String], issuer: String) -> [String: String] {
                var key = key.merging(["issuer": issuer]) { first, _ in first }
                key["alg"] = nil
                return key
            }
            let issuer = "\(request.baseURL)/microsoft/{tenantid}/v2.0"
            let shared = try await keys.jwks(Self.keySpec)["keys"]?.map { published($0, issuer: issuer) } ?? []
            let consumers = "\(request.baseURL)/microsoft/\(Self.consumerTenantID)/v2.0"
            let own = try await keys.jwks(Self.consumerKeySpec)["keys"]?.map { published($0, issuer: consumers) } ?? []
            return Response.json(["keys": shared + own])
        }
        let authorize: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, context in
            var request = request
            var query = request.formQuery
            if request.method == .post { for (key, value) in try await request.formBody() where query[key] == nil { query[key] = value } }
            return await self.authorize(query, tenant: context.parameters.get("tenant") ?? "", base: request.baseURL)
        }
        router.get("/microsoft/:tenant/oauth2/v2.0/authorize", use: authorize)
        router.post("/microsoft/:tenant/oauth2/v2.0/authorize", use: authorize)
        router.post("/microsoft/:tenant/oauth2/v2.0/token") { request, context in
            var request = request
            let form = try await request.formBody()
            return await token(
                form, authorization: request.headers[.authorization], tenant: context.parameters.get("tenant") ?? "", base: request.baseURL)
        }
    }

    private func discovery(tenant: String, audience: MicrosoftDirectory.Audience, base: String) -> Response {
        let root = "\(base)/microsoft/\(tenant)"
        return Response.json(
            [
                "token_endpoint": "\(root)/oauth2/v2.0/token",
                "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
                "jwks_uri": "\(root)/discovery/v2.0/keys",
                "response_modes_supported": ["query", "fragment", "form_post"],
                "subject_types_supported": ["pairwise"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
                "scopes_supported": ["openid", "profile", "email", "offline_access"],
                "issuer": MicrosoftDirectory.issuer(audience, base: base),
                "request_uri_parameter_supported": false,
                "userinfo_endpoint": "\(base)/graph/oidc/userinfo",
                "authorization_endpoint": "\(root)/oauth2/v2.0/authorize",
                "end_session_endpoint": "\(root)/oauth2/v2.0/logout",
                "claims_supported": [
                    "sub", "iss", "aud", "exp", "iat", "auth_time", "acr", "nonce", "preferred_username", "name", "tid", "ver", "email",
                ],
                "msgraph_host": "graph.microsoft.com",
            ], headers: [.cacheControl: "max-age=86400, private"])
    }

    // MARK: Authorize

    private func authorize(_ query: [String: String], tenant: String, base: String) async -> Response {
        guard let audience = MicrosoftDirectory.audience(tenant) else {
            return MicrosoftErrors.page("AADSTS90002: Tenant '\(tenant)' not found.")
        }
        guard let clientID = query["client_id"], let client = clients.first(where: { $0.id == clientID }) else {
            return MicrosoftErrors.page("AADSTS700016: Application with identifier '\(query["client_id"] ?? "")' was not found in the directory.")
        }
        guard let redirectURI = query["redirect_uri"], client.accepts(redirectURI: redirectURI, rule: .exact) else {
            return MicrosoftErrors.page(
                "AADSTS50011: The redirect URI specified in the request does not match the redirect URIs configured for the application.")
        }
        let formPost = query["response_mode"] == "form_post"
        func answer(_ pairs: [(String, String)]) -> Response {
            var all = pairs
            if let state = query["state"] { all.append(("state", state)) }
            return formPost ? MicrosoftErrors.formPost(to: redirectURI, all) : Response.redirect(to: WebText.append(to: redirectURI, all))
        }
        func fail(_ error: String, _ code: Int, _ text: String) -> Response {
            answer([("error", error), ("error_description", MicrosoftErrors.description(code, text)), ("error_uri", MicrosoftErrors.uri(code))])
        }
        guard query["response_type"] == "code" else {
            return fail("unsupported_response_type", 700054, "response_type 'id_token' is not enabled for the application.")
        }
        if let method = query["code_challenge_method"], method != "S256", method != "plain" {
            return fail("invalid_request", 501491, "Invalid code_challenge_method.")
        }
        let scopes = (query["scope"] ?? "").split(separator: " ").map(String.init)
        let hint = query["login_hint"]
        guard query["prompt"] != "select_account", let hint,
            let user = MicrosoftDirectory.users.first(where: { $0.hint.lowercased() == hint.lowercased() })
        else {
            return Response.text(picker(query, tenant: tenant, audience: audience), contentType: "text/html; charset=utf-8")
        }
        guard MicrosoftDirectory.admits(audience, user) else {
            // Tenant restriction: a user of another tenant gets no code from this endpoint.
            return fail(
                "access_denied", 50020,
                "User account '\(user.hint)' from identity provider does not exist in tenant '\(tenant)' and cannot access the application.")
        }
        if query["deny"] == "1" { return fail("access_denied", 65004, "User declined to consent to access the app.") }
        let code = "M." + Randomness.alphanumeric(48)
        await state.storeCode(
            code,
            MicrosoftCode(
                clientID: clientID, redirectURI: redirectURI, userHint: user.hint, scopes: scopes, nonce: query["nonce"],
                codeChallenge: query["code_challenge"], codeChallengeMethod: query["code_challenge_method"] ?? "plain", issuedAt: Date(),
                redeemed: false))
        return answer([("code", code)])
    }

    private func picker(_ query: [String: String], tenant: String, audience: MicrosoftDirectory.Audience) -> String {
        func link(_ extra: [String: String]) -> String {
            var merged = query
            merged["prompt"] = nil
            for (key, value) in extra { merged[key] = value }
            return "/microsoft/\(tenant)/oauth2/v2.0/authorize?" + FormEncoding.encode(merged.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        }
        let items = MicrosoftDirectory.users.filter { MicrosoftDirectory.admits(audience, $0) }.map { user in
            let label = WebText.html("\(user.displayName) <\(user.hint)> (\(user.traits.joined(separator: ", ")))")
            return "<li><a id=\"user-\(WebText.html(user.hint))\" href=\"\(WebText.html(link(["login_hint": user.hint])))\">\(label)</a></li>"
        }
        return """
            <!doctype html>
            <html><head><meta charset="utf-8"><title>Sign in to your account (emulator)</title></head>
            <body style="font-family: sans-serif; max-width: 40em; margin: 2em auto">
            <h1>Pick an account</h1><p>Provider emulator: Microsoft, tenant <code>\(WebText.html(tenant))</code>.</p>
            <ul>\(items.joined())</ul>
            </body></html>
            """
    }

    // MARK: Token

    private func token(_ form: [String: String], authorization: String?, tenant: String, base: String) async -> Response {
        guard MicrosoftDirectory.audience(tenant) != nil else {
            return MicrosoftErrors.token("invalid_request", 90002, "Tenant '\(tenant)' not found.")
        }
        let (clientID, secret) = ClientCredentials.of(form: form, authorization: authorization)
        guard let clientID, !clientID.isEmpty else {
            return MicrosoftErrors.token("invalid_request", 900144, "The request body must contain the following parameter: 'client_id'.")
        }
        guard let client = clients.first(where: { $0.id == clientID }) else {
            return MicrosoftErrors.token("unauthorized_client", 700016, "Application with identifier '\(clientID)' was not found in the directory.")
        }
        guard secret == client.secret else {
            return MicrosoftErrors.token(
                "invalid_client", 7_000_215,
                "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '\(clientID)'.",
                status: .unauthorized)
        }
        switch form["grant_type"] {
        case "authorization_code":
            return await redeem(form, clientID: clientID, base: base)
        case "refresh_token":
            guard let presented = form["refresh_token"], let record = await state.liveRefresh(presented), record.clientID == clientID,
                let user = MicrosoftDirectory.users.first(where: { $0.hint == record.userHint })
            else {
                return MicrosoftErrors.token(
                    "invalid_grant", 70008, "The provided authorization code or refresh token has expired due to inactivity.")
            }
            return await issue(for: user, clientID: clientID, scopes: record.scopes, nonce: nil, base: base)
        case nil:
            return MicrosoftErrors.token("invalid_request", 900144, "The request body must contain the following parameter: 'grant_type'.")
        default:
            return MicrosoftErrors.token("unsupported_grant_type", 70003, "The app requested an unsupported grant type.")
        }
    }

    private func redeem(_ form: [String: String], clientID: String, base: String) async -> Response {
        guard let code = form["code"], let (issued, alreadyRedeemed) = await state.redeem(code), issued.clientID == clientID else {
            return MicrosoftErrors.token("invalid_grant", 9_002_313, "Invalid request. Request is malformed or invalid.")
        }
        if alreadyRedeemed {
            return MicrosoftErrors.token(
                "invalid_grant", 54005,
                "OAuth2 Authorization code was already redeemed, please retry with a new valid code or use an existing refresh token.")
        }
        guard Date().timeIntervalSince(issued.issuedAt) < Double(codeLifetime.components.seconds) else {
            return MicrosoftErrors.token("invalid_grant", 70008, "The provided authorization code or refresh token has expired due to inactivity.")
        }
        guard form["redirect_uri"] == issued.redirectURI else {
            return MicrosoftErrors.token(
                "invalid_grant", 50011, "The redirect URI specified in the request does not match the one used to obtain the code.")
        }
        if let challenge = issued.codeChallenge {
            let verifier = form["code_verifier"] ?? ""
            let computed = issued.codeChallengeMethod == "S256" ? Randomness.s256(verifier) : verifier
            guard !verifier.isEmpty, computed == challenge else {
                return MicrosoftErrors.token(
                    "invalid_grant", 501_481, "The Code_Verifier does not match the code_challenge supplied in the authorization request.")
            }
        }
        guard let user = MicrosoftDirectory.users.first(where: { $0.hint == issued.userHint }) else {
            return MicrosoftErrors.token("invalid_grant", 50034, "The user account does not exist in the directory.")
        }
        return await issue(for: user, clientID: clientID, scopes: issued.scopes, nonce: issued.nonce, base: base)
    }

    /// Access token always; refresh token only with `offline_access`; ID token only with `openid`.
    private func issue(for user: MicrosoftSeedUser, clientID: String, scopes: [String], nonce: String?, base: String) async -> Response {
        let record = MicrosoftToken(clientID: clientID, userHint: user.hint, scopes: scopes, expired: false, revoked: false)
        // Personal-account access tokens are opaque; the gateway must never decode either kind.
        let access = (user.isPersonal ? "EwA" : "eyJ0eXAi.") + Randomness.alphanumeric(60)
        await state.issueAccess(access, record)
        var body: [String: Any] = [
            "token_type": "Bearer", "scope": scopes.filter { !["openid", "profile", "email", "offline_access"].contains($0) }.joined(separator: " "),
            "expires_in": 3599, "ext_expires_in": 3599, "access_token": access,
        ]
        if scopes.contains("offline_access") {
            let refresh = "1.AR" + Randomness.alphanumeric(60)
            await state.issueRefresh(refresh, record)
            body["refresh_token"] = refresh
        }
        if scopes.contains("openid") {
            let now = Int(Date().timeIntervalSince1970)
            var claims: [String: EmulatorClaims.ClaimValue] = [
                "ver": .string("2.0"), "iss": .string("\(base)/microsoft/\(user.tenantId)/v2.0"),
                "sub": .string(MicrosoftDirectory.subject(user, clientID: clientID)), "aud": .string(clientID), "exp": .number(now + 3600),
                "iat": .number(now), "nbf": .number(now), "tid": .string(user.tenantId),
            ]
            if let nonce { claims["nonce"] = .string(nonce) }
            // `oid` comes with the profile scope only (providers.md §1: "needs profile scope").
            if scopes.contains("profile") {
                claims["oid"] = .string(user.oid)
                claims["name"] = .string(user.displayName)
                claims["preferred_username"] = .string(user.userPrincipalName)
            }
            if scopes.contains("email"), let email = user.emailClaim {
                claims["email"] = .string(email)
                if user.emailDomainVerified { claims["xms_edov"] = .bool(true) }
            }
            let minter = IDTokenMinter(spec: Self.keySpec, state: tamper, keys: keys, otherTenantSpec: Self.consumerKeySpec)
            guard let idToken = try? await minter.mint(claims, audience: clientID, base: base) else {
                return MicrosoftErrors.token(
                    "temporarily_unavailable", 90033, "A transient error has occurred. Please try again.", status: .serviceUnavailable)
            }
            body["id_token"] = idToken
        }
        return Response.json(body, headers: [.cacheControl: "no-store, no-cache", HTTPField.Name("Pragma")!: "no-cache"])
    }
}
