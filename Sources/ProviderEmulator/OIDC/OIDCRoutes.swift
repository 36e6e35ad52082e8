import Foundation
import Hummingbird
import JWTKit

/// One emulated OpenID Provider's endpoints: discovery, authorize, token, userinfo, JWKS and
/// pictures, under the issuer's path prefix.
struct OIDCRoutes {
    let spec: OIDCIssuerSpec
    let clients: [ClientRegistration]
    let state: OIDCState
    let keys: SigningKeys
    let codeLifetime: Duration

    func register(on router: Router<BasicRequestContext>) {
        let p = spec.prefix
        router.get("\(p)/.well-known/openid-configuration") { request, _ in
            discovery(base: request.baseURL)
        }
        router.get("\(p)\(spec.authorizePath)") { request, _ in
            await authorize(request.formQuery, base: request.baseURL)
        }
        router.post("\(p)\(spec.tokenPath)") { request, _ in
            var request = request
            let form = try await request.formBody()
            return await token(form, authorization: request.headers[.authorization], base: request.baseURL)
        }
        let userinfo: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            await userInfo(authorization: request.headers[.authorization], base: request.baseURL)
        }
        router.get("\(p)\(spec.userinfoPath)", use: userinfo)
        router.post("\(p)\(spec.userinfoPath)", use: userinfo)
        router.get("\(p)\(spec.jwksPath)") { _, _ in
            Response.json(try await keys.jwks(spec), contentType: "application/jwk-set+json")
        }
        router.get("\(p)/pictures/:subject") { _, context in
            guard let user = users.first(where: { $0.subject == context.parameters.get("subject") && $0.hasPicture }) else {
                return Response.text("Not Found", status: .notFound)
            }
            let shade = UInt8(truncatingIfNeeded: user.subject.utf8.reduce(0) { $0 &+ Int($1) })
            // A picture host that sends only Last-Modified.
            return Response(
                status: .ok, headers: [.contentType: "image/png", .cacheControl: "max-age=300", .lastModified: "Sun, 01 Nov 2026 08:00:00 GMT"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: AvatarImage.png(size: 96, color: (shade, 90, 160)))))
        }
    }

    private var users: [OIDCSeedUser] { SeededUsers.oidc.filter { $0.issuer == spec.name } }

    /// A seeded user, or at the generic issuer a generated load user (`load-N@oidc.example`).
    private func user(hint: String) -> OIDCSeedUser? {
        users.first { $0.hint == hint } ?? (spec.name == "oidc" ? OIDCSeedUser.load(hint: hint) : nil)
    }

    private func user(subject: String) -> OIDCSeedUser? {
        users.first { $0.subject == subject } ?? (spec.name == "oidc" ? OIDCSeedUser.load(subject: subject) : nil)
    }

    /// A new access token. A load user's names its subject (`at-load-7.…`), so that a static
    /// server standing in for userinfo in the benchmark can answer each user's own `sub`.
    private func accessToken(subject: String) -> String {
        OIDCSeedUser.load(subject: subject) != nil ? "at-\(subject)." + Randomness.alphanumeric(40) : "at-" + Randomness.alphanumeric(40)
    }

    // MARK: Discovery

    private func discovery(base: String) -> Response {
        let issuer = spec.issuer(base: base)
        var document: [String: Any] = [
            "issuer": issuer,
            "authorization_endpoint": issuer + spec.authorizePath,
            "token_endpoint": issuer + spec.tokenPath,
            "userinfo_endpoint": issuer + spec.userinfoPath,
            "jwks_uri": issuer + spec.jwksPath,
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "id_token_signing_alg_values_supported": [spec.algorithm],
            "scopes_supported": ["openid", "profile", "email"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "claims_supported": ["aud", "email", "email_verified", "exp", "family_name", "given_name", "iat", "iss", "locale", "name", "sub"],
            "response_modes_supported": ["query"],
            "code_challenge_methods_supported": ["S256", "plain"],
        ]
        if spec.issParameter { document["authorization_response_iss_parameter_supported"] = true }
        if spec.yahooErrors { document["token_revocation_endpoint"] = issuer + "/oauth2/revoke" }
        return Response.json(document)
    }

    // MARK: Authorize

    private func authorize(_ query: [String: String], base: String) async -> Response {
        guard let clientID = query["client_id"], let client = clients.first(where: { $0.id == clientID }),
            let redirectURI = query["redirect_uri"], client.accepts(redirectURI: redirectURI, rule: .exact)
        else {
            // A bad client or redirect is shown to the user, never redirected (RFC 6749 §4.1.2.1).
            return Response.text(
                "<html><body><h1>Developers: Please specify a valid request and submit again.</h1></body></html>", status: .badRequest,
                contentType: "text/html; charset=utf-8")
        }
        var back: [(String, String)] = []
        if let state = query["state"] { back.append(("state", state)) }
        if spec.issParameter {
            if await state.take(.callbackIssuerWrong, issuer: spec.name) {
                back.append(("iss", base + "/evil-issuer"))
            } else if !(await state.take(.callbackIssuerMissing, issuer: spec.name)) {
                back.append(("iss", spec.issuer(base: base)))
            }
        }
        func fail(_ error: String, _ description: String) -> Response {
            Response.redirect(to: WebText.append(to: redirectURI, [("error", error), ("error_description", description)] + back))
        }
        guard query["response_type"] == "code" else { return fail("unsupported_response_type", "Only the code flow is supported.") }
        let scopes = (query["scope"] ?? "").split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        guard scopes.contains("openid") else { return fail("invalid_scope", "The openid scope is required.") }
        if let method = query["code_challenge_method"], method != "S256", method != "plain" {
            return fail("invalid_request", "Unsupported code_challenge_method.")
        }
        guard query["prompt"] != "select_account", let hint = query["login_hint"], let user = user(hint: hint) else {
            return Response.text(picker(query), contentType: "text/html; charset=utf-8")
        }
        if query["deny"] == "1" { return fail("access_denied", "The user denied the request.") }
        let code = Randomness.alphanumeric(24)
        await state.storeCode(
            code,
            OIDCIssuedCode(
                issuer: spec.name, clientID: clientID, redirectURI: redirectURI, subject: user.subject, scopes: scopes, nonce: query["nonce"],
                codeChallenge: query["code_challenge"], codeChallengeMethod: query["code_challenge_method"], issuedAt: Date()))
        return Response.redirect(to: WebText.append(to: redirectURI, [("code", code)] + back))
    }

    private func picker(_ query: [String: String]) -> String {
        func link(_ extra: [String: String]) -> String {
            var merged = query
            merged["prompt"] = nil
            for (key, value) in extra { merged[key] = value }
            return spec.prefix + spec.authorizePath + "?" + FormEncoding.encode(merged.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        }
        let items = users.map { user in
            let label = WebText.html("\(user.name) <\(user.email)> (\(user.traits.joined(separator: ", ")))")
            return "<li><a id=\"user-\(WebText.html(user.hint))\" href=\"\(WebText.html(link(["login_hint": user.hint])))\">\(label)</a></li>"
        }
        return """
            <!doctype html>
            <html><head><meta charset="utf-8"><title>Sign in (\(spec.providerId) emulator)</title></head>
            <body style="font-family: sans-serif; max-width: 40em; margin: 2em auto">
            <h1>Sign in to \(spec.providerId)</h1>
            <p>Provider emulator: choose an account.</p>
            <ul>\(items.joined())</ul>
            <p><a id="deny" href="\(WebText.html(link(["login_hint": users[0].hint, "deny": "1"])))">Cancel</a></p>
            </body></html>
            """
    }

    // MARK: Token

    private func token(_ form: [String: String], authorization: String?, base: String) async -> Response {
        let (clientID, secret) = ClientCredentials.of(form: form, authorization: authorization)
        guard let clientID, let secret, !clientID.isEmpty else {
            return tokenError("INVALID_INPUT", "invalid_request", "client_id is empty", status: .badRequest)
        }
        guard clients.contains(where: { $0.id == clientID && $0.secret == secret }) else {
            var response = tokenError("invalid_client", "invalid_client", "Client authentication failed.", status: .unauthorized)
            response.headers[.wwwAuthenticate] = "Basic realm=\"\(spec.providerId)\""
            return response
        }
        switch form["grant_type"] {
        case "authorization_code":
            return await redeem(form, clientID: clientID, base: base)
        case "refresh_token":
            guard let refresh = form["refresh_token"], let record = await state.token(refresh), record.refresh, record.clientID == clientID,
                !record.expired
            else {
                return tokenError("INVALID_REFRESH_TOKEN", "invalid_grant", "The refresh token is invalid.", status: .badRequest)
            }
            let access = accessToken(subject: record.subject)
            await state.storeToken(
                access, OIDCIssuedToken(issuer: spec.name, clientID: clientID, subject: record.subject, scopes: record.scopes, expired: false))
            return Response.json(["access_token": access, "token_type": "bearer", "expires_in": 3600], headers: [.cacheControl: "no-store"])
        default:
            return tokenError("INVALID_INPUT", "unsupported_grant_type", "grant_type is not supported.", status: .badRequest)
        }
    }

    private func redeem(_ form: [String: String], clientID: String, base: String) async -> Response {
        let invalid = tokenError("INVALID_AUTHORIZATION_CODE", "invalid_grant", "OAuth authorization code expired or invalid", status: .badRequest)
        guard let code = form["code"], let issued = await state.redeemCode(code), issued.issuer == spec.name, issued.clientID == clientID,
            issued.redirectURI == form["redirect_uri"], Date().timeIntervalSince(issued.issuedAt) < Double(codeLifetime.components.seconds),
            let user = user(subject: issued.subject)
        else { return invalid }
        if let challenge = issued.codeChallenge {
            let verifier = form["code_verifier"] ?? ""
            // RFC 7636 §4.3: a challenge sent without its method is `plain`.
            let expected = (issued.codeChallengeMethod ?? "plain") == "plain" ? verifier : Randomness.s256(verifier)
            guard !verifier.isEmpty, expected == challenge else { return invalid }
        }
        let access = accessToken(subject: user.subject)
        let refresh = "rt-" + Randomness.alphanumeric(40)
        let record = OIDCIssuedToken(issuer: spec.name, clientID: clientID, subject: user.subject, scopes: issued.scopes, expired: false)
        await state.storeToken(access, record)
        var refreshRecord = record
        refreshRecord.refresh = true
        await state.storeToken(refresh, refreshRecord)
        do {
            let idToken = try await idToken(for: user, audience: clientID, nonce: issued.nonce, scopes: issued.scopes, base: base)
            return Response.json(
                [
                    "access_token": access, "refresh_token": refresh, "token_type": "bearer", "expires_in": 3600, "id_token": idToken,
                    "scope": issued.scopes.joined(separator: " "),
                ], headers: [.cacheControl: "no-store"])
        } catch {
            return tokenError("SERVER_ERROR", "server_error", "The ID token could not be signed.", status: .internalServerError)
        }
    }

    /// Yahoo mixes upper-case codes in; a standard issuer uses RFC 6749's.
    private func tokenError(_ yahooCode: String, _ standardCode: String, _ description: String, status: HTTPResponse.Status) -> Response {
        Response.json(["error": spec.yahooErrors ? yahooCode : standardCode, "error_description": description], status: status)
    }

    /// Signs an ID token for `user`, applying whatever tamper modes are armed. `audiences`
    /// (several client ids, as a provider with one client per platform issues them) replaces
    /// the single `aud`; `authorizedParty` sets `azp`.
    func idToken(
        for user: OIDCSeedUser, audience: String, nonce: String?, scopes: [String], base: String, audiences: [String]? = nil,
        authorizedParty: String? = nil
    ) async throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: EmulatorClaims.ClaimValue] = [
            "iss": .string(spec.issuer(base: base)), "sub": .string(user.subject), "aud": audiences.map { .strings($0) } ?? .string(audience),
            "iat": .number(now), "exp": .number(now + 3600), "auth_time": .number(now),
        ]
        if let nonce { claims["nonce"] = .string(nonce) }
        if let authorizedParty { claims["azp"] = .string(authorizedParty) }
        if scopes.contains("profile") {
            claims["name"] = .string(user.name)
            claims["given_name"] = .string(user.givenName)
            claims["family_name"] = .string(user.familyName)
            claims["locale"] = .string(user.locale)
        }
        if scopes.contains("email") {
            claims["email"] = .string(user.email)
            claims["email_verified"] = .bool(user.emailVerified)
        }
        return try await IDTokenMinter(spec: spec, state: state, keys: keys).mint(claims, audience: audience, base: base)
    }

    // MARK: Userinfo

    private func userInfo(authorization: String?, base: String) async -> Response {
        guard let authorization, authorization.lowercased().hasPrefix("bearer "),
            let record = await state.token(String(authorization.dropFirst(7))), record.issuer == spec.name, !record.refresh, !record.expired,
            let user = user(subject: record.subject)
        else {
            return Response.json(
                ["error": "invalid_token", "error_description": "The access token is invalid or expired."], status: .unauthorized,
                headers: [.wwwAuthenticate: "Bearer error=\"invalid_token\", error_description=\"The access token is invalid or expired\""])
        }
        var info: [String: Any] = ["sub": user.subject]
        if await state.take(.userinfoSubjectMismatch, issuer: spec.name) { info["sub"] = "another-subject" }
        // The fields depend on what was granted (providers.md §3.4).
        if record.scopes.contains("profile") {
            info["name"] = user.name
            info["given_name"] = user.givenName
            info["family_name"] = user.familyName
            info["locale"] = user.locale
            if let chosen = await state.picture(subject: user.subject) {
                info["picture"] = chosen
            } else if user.hasPicture {
                info["picture"] = spec.issuer(base: base) + "/pictures/" + user.subject
            }
        }
        if record.scopes.contains("email") {
            info["email"] = user.email
            info["email_verified"] = await state.take(.userinfoEmailUnverified, issuer: spec.name) ? false : user.emailVerified
        }
        return Response.json(info)
    }
}
