import Foundation
import Hummingbird

/// github.com's OAuth endpoints under `/github`: authorize and access_token
/// (reference/providers.md §4.1–4.2).
struct GitHubOAuthRoutes {
    let state: EmulatorState
    let configuration: EmulatorConfiguration

    func register(on router: Router<BasicRequestContext>) {
        router.get("/github/login/oauth/authorize") { request, _ in
            await authorize(request)
        }
        router.post("/github/login/oauth/access_token") { request, _ in
            var request = request
            var parameters = request.formQuery
            for (key, value) in try await request.formBody() { parameters[key] = value }
            return await accessToken(parameters, accept: request.headers[.accept] ?? "")
        }
    }

    // MARK: Authorize

    private func authorize(_ request: Request) async -> Response {
        let query = request.formQuery
        guard let clientID = query["client_id"], let client = configuration.githubClients.first(where: { $0.id == clientID }) else {
            // GitHub shows its own 404 page for an unknown application.
            return Response.text("<html><body><h1>404</h1><p>Not Found</p></body></html>", status: .notFound, contentType: "text/html; charset=utf-8")
        }
        // Optional at GitHub: without it, the registered callback.
        guard let redirectURI = query["redirect_uri"] ?? client.callbackURL, client.accepts(redirectURI: redirectURI, rule: .subPath) else {
            return Response.text(
                "<html><body><h1>Redirect URI mismatch</h1><p>The redirect_uri MUST match the registered callback URL for this application.</p></body></html>",
                status: .badRequest, contentType: "text/html; charset=utf-8")
        }
        let state = query["state"]
        if let method = query["code_challenge_method"], method != "S256" {
            return Response.redirect(
                to: WebText.append(
                    to: redirectURI,
                    [
                        ("error", "invalid_request"), ("error_description", "Only the S256 code_challenge_method is supported."),
                        ("state", state ?? ""),
                    ]))
        }
        let forcePicker = query["prompt"] == "select_account"
        guard !forcePicker, let login = query["login"], let user = SeededUsers.github.first(where: { $0.login == login }) else {
            return Response.text(picker(request: request, query: query, redirectURI: redirectURI), contentType: "text/html; charset=utf-8")
        }
        if query["deny"] == "1" {
            return Response.redirect(
                to: WebText.append(
                    to: redirectURI,
                    [
                        ("error", "access_denied"), ("error_description", "The user has denied your application access."),
                        (
                            "error_uri",
                            "/apps/building-integrations/setting-up-and-registering-oauth-apps/troubleshooting-authorization-request-errors/#access-denied"
                        ),
                        ("state", state ?? ""),
                    ]))
        }
        let code = Randomness.hex(10)
        let scopes = (query["scope"] ?? "").split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        let issued = IssuedCode(
            clientID: clientID, redirectURI: query["redirect_uri"], login: user.login, scopes: scopes,
            codeChallenge: query["code_challenge"], issuedAt: Date())
        // Stored before the redirect leaves, so the token call can never race ahead of it.
        await self.state.storeCode(code, issued)
        var pairs = [("code", code)]
        if let state { pairs.append(("state", state)) }
        return Response.redirect(to: WebText.append(to: redirectURI, pairs))
    }

    /// The tiny account picker: one plain link per seeded user, and a cancel link.
    private func picker(request: Request, query: [String: String], redirectURI: String) -> String {
        var base = query
        base["prompt"] = nil
        func link(_ extra: [String: String]) -> String {
            var merged = base
            for (key, value) in extra { merged[key] = value }
            let pairs = merged.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            return "/github/login/oauth/authorize?" + FormEncoding.encode(pairs)
        }
        let items = SeededUsers.github.map { user in
            let label = WebText.html("\(user.login) — \(user.name ?? "no name") (\(user.traits.joined(separator: ", ")))")
            return "<li><a id=\"user-\(WebText.html(user.login))\" href=\"\(WebText.html(link(["login": user.login])))\">\(label)</a></li>"
        }
        let firstLogin = SeededUsers.github[0].login
        return """
            <!doctype html>
            <html><head><meta charset="utf-8"><title>Sign in to GitHub (emulator)</title></head>
            <body style="font-family: sans-serif; max-width: 40em; margin: 2em auto">
            <h1>Sign in to GitHub</h1>
            <p>Provider emulator: choose an account to authorize <code>\(WebText.html(query["client_id"] ?? ""))</code>.</p>
            <ul>\(items.joined())</ul>
            <p><a id="deny" href="\(WebText.html(link(["login": firstLogin, "deny": "1"])))">Cancel (deny access)</a></p>
            </body></html>
            """
    }

    // MARK: Token

    private func accessToken(_ parameters: [String: String], accept: String) async -> Response {
        guard let clientID = parameters["client_id"], let client = configuration.githubClients.first(where: { $0.id == clientID }),
            parameters["client_secret"] == client.secret
        else {
            return tokenError(
                "incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.",
                "incorrect-client-credentials", accept: accept)
        }
        if parameters["grant_type"] == "refresh_token" {
            return await refresh(parameters["refresh_token"] ?? "", client: client, accept: accept)
        }
        guard let code = parameters["code"], let issued = await state.redeemCode(code), issued.clientID == clientID,
            Date().timeIntervalSince(issued.issuedAt) < Double(configuration.codeLifetime.components.seconds)
        else {
            return tokenError("bad_verification_code", "The code passed is incorrect or expired.", "bad-verification-code", accept: accept)
        }
        if let registered = issued.redirectURI, let sent = parameters["redirect_uri"], sent != registered {
            return tokenError(
                "redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.",
                "redirect-uri-mismatch2", accept: accept)
        }
        if let challenge = issued.codeChallenge {
            // GitHub's exact error for a PKCE mismatch is unconfirmed (providers.md §9); the
            // emulator answers like any other unusable code.
            guard let verifier = parameters["code_verifier"], Randomness.s256(verifier) == challenge else {
                return tokenError("bad_verification_code", "The code passed is incorrect or expired.", "bad-verification-code", accept: accept)
            }
        }
        return await issueTokens(login: issued.login, scopes: issued.scopes, client: client, accept: accept)
    }

    /// `grant_type=refresh_token` (GitHub Apps only): a spent, unknown or revoked refresh
    /// token is `bad_refresh_token`, with HTTP 200 like every GitHub token error.
    private func refresh(_ refreshToken: String, client: ClientRegistration, accept: String) async -> Response {
        guard client.expiringUserTokens == true, let grant = await state.redeemRefreshToken(refreshToken, clientID: client.id) else {
            return tokenError("bad_refresh_token", "The refresh token passed is incorrect or expired.", "bad-refresh-token", accept: accept)
        }
        return await issueTokens(login: grant.login, scopes: grant.scopes, client: client, accept: accept)
    }

    /// An OAuth app's lasting `gho_` token, or a GitHub App's `ghu_` token for 8 hours with
    /// a `ghr_` refresh token for 6 months (providers.md §4.2; a GitHub App's `scope` is "").
    private func issueTokens(login: String, scopes: [String], client: ClientRegistration, accept: String) async -> Response {
        let expiring = client.expiringUserTokens == true
        let token = (expiring ? "ghu_" : "gho_") + Randomness.alphanumeric(36)
        let record = IssuedToken(
            login: login, clientID: client.id, scopes: scopes, expired: false, revoked: false, used: 0,
            resetAt: Int(Date().timeIntervalSince1970) + 3600)
        await state.storeToken(token, record)
        guard expiring else {
            return negotiated([("access_token", token), ("scope", scopes.joined(separator: ",")), ("token_type", "bearer")], accept: accept)
        }
        let refreshToken = "ghr_" + Randomness.alphanumeric(76)
        await state.storeRefreshToken(refreshToken, accessToken: token, record)
        let fields = [
            ("access_token", token), ("expires_in", "28800"), ("refresh_token", refreshToken), ("refresh_token_expires_in", "15897600"),
            ("scope", ""), ("token_type", "bearer"),
        ]
        return negotiated(fields, accept: accept)
    }

    /// GitHub answers token errors with HTTP 200 and an `error` field (providers.md §4.2).
    private func tokenError(_ error: String, _ description: String, _ anchor: String, accept: String) -> Response {
        let uri = "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#\(anchor)"
        return negotiated([("error", error), ("error_description", description), ("error_uri", uri)], accept: accept)
    }

    /// Form-encoded by default, JSON or XML when the `Accept` header asks for it.
    private func negotiated(_ fields: [(String, String)], accept: String) -> Response {
        if accept.contains("application/json") {
            var object: [String: Any] = [:]
            // Lifetimes are JSON numbers; everything else is a string.
            for (key, value) in fields { object[key] = key.hasSuffix("expires_in") ? Int(value) ?? 0 : value }
            return Response.json(object)
        }
        if accept.contains("application/xml") {
            let inner = fields.map { "<\($0.0)>\(WebText.html($0.1))</\($0.0)>" }.joined()
            return Response.text("<OAuth>\(inner)</OAuth>", contentType: "application/xml; charset=utf-8")
        }
        return Response.text(FormEncoding.encode(fields), contentType: "application/x-www-form-urlencoded; charset=utf-8")
    }

}
