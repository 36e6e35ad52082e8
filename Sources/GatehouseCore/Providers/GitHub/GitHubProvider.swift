import CurlClient
import Foundation
import Logging

/// GitHub sign-in: OAuth authorization code with PKCE, then `/user` and `/user/emails`
/// (reference/providers.md §4).
public struct GitHubProvider: IdentityProvider {
    /// Always `github.com`.
    public let id = "github.com"
    let configuration: GitHubConfiguration
    let http: UpstreamHTTP
    /// The tokens GitHub has rate-limited (shared with the passthrough of GitHub's API).
    let rateLimits = GitHubRateLimits()

    /// Where the time comes from (token expiry).
    let clock: any GatehouseClock
    /// Whether GitHub accepts the gateway's client credentials (seen at refreshes).
    let health: ProviderHealth
    /// `configuration.avatarURLPrefixes`, parsed once rather than at every photo transfer.
    let avatarHosts: URLAllowList

    /// Creates the provider over the shared libcurl client.
    public init(configuration: GitHubConfiguration, http: UpstreamHTTP, clock: any GatehouseClock = SystemClock(), logger: Logger? = nil) {
        self.clock = clock
        self.configuration = configuration
        self.http = http
        self.health = ProviderHealth(logger: logger)
        self.avatarHosts = URLAllowList(configuration.avatarURLPrefixes)
    }

    /// The configured default scopes.
    public var defaultScopes: [String] { configuration.defaultScopes }

    /// `…/login/oauth/authorize?client_id&redirect_uri&scope&state&code_challenge…` plus custom parameters.
    public func authorizationRedirect(for request: AuthorizationRequest) -> AuthorizationRedirect {
        var pairs: [(String, String)] = [
            ("client_id", configuration.clientID),
            ("redirect_uri", request.redirectURI),
            ("scope", request.scopes.joined(separator: " ")),
            ("state", request.state),
            ("code_challenge", request.codeChallenge),
            ("code_challenge_method", "S256"),
        ]
        pairs += request.customParameters
        return AuthorizationRedirect(url: configuration.authorizeURL + "?" + FormEncoding.encode(pairs))
    }

    /// Exchanges the code, then reads `/user` and `/user/emails`.
    public func completeSignIn(_ callback: CallbackParameters) async throws -> ProviderSignIn {
        let tokens = try await exchangeCode(callback.code, codeVerifier: callback.codeVerifier, redirectURI: callback.redirectURI)
        return ProviderSignIn(tokens: tokens, profile: try await fetchProfile(tokens: tokens))
    }

    /// POSTs the code to the token endpoint, asking for JSON. GitHub reports errors with
    /// HTTP 200 and an `error` member, so the body decides, not the status.
    public func exchangeCode(_ code: String, codeVerifier: String, redirectURI: String) async throws -> ProviderTokens {
        let response = try await tokenRequest([
            ("client_id", configuration.clientID),
            ("client_secret", configuration.clientSecret),
            ("code", code),
            ("redirect_uri", redirectURI),
            ("code_verifier", codeVerifier),
        ])
        guard response.status == 200 else {
            throw UpstreamErrors.status(response, providerId: id, shared: true)
        }
        let body = Self.decodeTokenBody(response)
        if let error = body["error"] {
            // The error code is GitHub's fixed vocabulary; the description never echoes the code.
            throw GatehouseError.invalidIdPResponse("GitHub refused the authorization code: \(error.truncated(toBytes: 64)).")
        }
        guard let accessToken = body["access_token"], !accessToken.isEmpty else {
            throw GatehouseError.invalidIdPResponse("GitHub's token response has no access_token.")
        }
        health.recovered()
        return self.tokens(from: body, accessToken: accessToken)
    }

    /// POSTs a form to the token endpoint, asking for JSON.
    private func tokenRequest(_ form: [(String, String)]) async throws -> OutboundResponse {
        var request = OutboundRequest(
            method: "POST", url: configuration.tokenURL,
            headers: ["Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"],
            body: Array(FormEncoding.encode(form).utf8), maxResponseBytes: 64 << 10)
        request.priority = .high  // sign-ins and refreshes: ahead of passthrough calls (`OutboundPriority.high`)
        return try await http.execute(request, endpoint: .token)
    }

    /// The token set of a successful answer: `scope` is comma-separated, `expires_in` and
    /// `refresh_token` come only for a GitHub App's expiring tokens.
    private func tokens(from body: [String: String], accessToken: String) -> ProviderTokens {
        let scopes = (body["scope"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        let expiresAt = ProviderTokens.expiry(expiresIn: body["expires_in"].flatMap(Double.init), now: clock.now().timeIntervalSince1970)
        return ProviderTokens(accessToken: accessToken, refreshToken: body["refresh_token"], expiresAt: expiresAt, scopes: scopes)
    }

    /// The refresh-token grant of a GitHub App's expiring user tokens (providers.md §4.2):
    /// the answer brings a new access token and a new refresh token (both old ones stop
    /// working). An OAuth app's lasting token has no refresh token: a dead one needs a new
    /// sign-in. Refusals come with HTTP 200 and are classified like every provider's
    /// (`RefreshRefusal`): `bad_refresh_token` ends the grant, `incorrect_client_credentials`
    /// is the operator's mistake.
    public func refresh(_ tokens: ProviderTokens) async throws -> ProviderTokens {
        guard let refreshToken = tokens.refreshToken else { throw GatehouseError.providerReauthRequired(id) }
        let response = try await tokenRequest([
            ("client_id", configuration.clientID),
            ("client_secret", configuration.clientSecret),
            ("grant_type", "refresh_token"),
            ("refresh_token", refreshToken),
        ])
        let body = Self.decodeTokenBody(response)
        guard response.status == 200, body["error"] == nil, let accessToken = body["access_token"], !accessToken.isEmpty else {
            throw RefreshRefusal.error(status: response.status, body: response.body, headers: response.headers, providerId: id, health: health)
        }
        health.recovered()
        var fresh = self.tokens(from: body, accessToken: accessToken)
        // The refresh token is never kept from before: GitHub spent it. A GitHub App's `scope`
        // is always empty, so the scopes of the sign-in stay.
        fresh.scopes = fresh.scopes.isEmpty ? tokens.scopes : fresh.scopes
        return fresh
    }

    /// A refused client registration, for `/readyz`.
    public func readinessProblem() async -> String? { health.readinessProblem }

    /// `/user`, plus `/user/emails` for the primary verified address (providers.md §4.4–4.5).
    public func fetchProfile(tokens: ProviderTokens) async throws -> ProviderProfile {
        let user = try await api("/user", tokens: tokens)
        return try normalize(user: user, emails: try? await api("/user/emails", tokens: tokens))
    }

    /// The same reads made conditional with `previous`'s validators: when both answer `304`,
    /// `previous` as it is (nothing to decode or normalize, and no rate-limit cost at GitHub);
    /// when one changed, the other is read whole too and the profile made anew.
    public func fetchProfile(tokens: ProviderTokens, previous: ProviderProfile) async throws -> ProviderProfile {
        let user = try await api("/user", tokens: tokens, validator: previous.validators?["/user"])
        let emails = try? await api("/user/emails", tokens: tokens, validator: previous.validators?["/user/emails"])
        if user.status == 304, emails?.status == 304 { return previous }
        let wholeUser = user.status == 304 ? try await api("/user", tokens: tokens) : user
        let wholeEmails = emails?.status == 304 ? try? await api("/user/emails", tokens: tokens) : emails
        return try normalize(user: wholeUser, emails: wholeEmails)
    }

    /// The profile of `/user`'s and `/user/emails`' answers (the latter optional: a grant
    /// without the email scope gets a 404), with their validators.
    private func normalize(user userResponse: OutboundResponse, emails emailsResponse: OutboundResponse?) throws -> ProviderProfile {
        let user = try JSONValue.parseRepeated(userResponse.body)
        guard let numericID = user["id"]?.integerValue, let login = user["login"]?.stringValue else {
            throw GatehouseError.invalidIdPResponse("GitHub's /user answer has no id or login.")
        }
        var emails: [JSONValue] = []
        if let response = emailsResponse, let list = try? JSONValue.parseRepeated(response.body).arrayValue {
            emails = list
        }
        var validators: [String: String] = [:]
        validators["/user"] = userResponse.headers["etag"]
        validators["/user/emails"] = emailsResponse?.headers["etag"]
        let (email, verified) = Self.chooseEmail(publicEmail: user["email"]?.stringValue, emails: emails)
        return ProviderProfile(
            providerId: id, federatedId: String(numericID), username: login,
            displayName: user["name"]?.stringValue ?? login,
            email: email, emailVerified: verified,
            photoSourceURL: user["avatar_url"]?.stringValue,
            profileURL: user["html_url"]?.stringValue,
            rawUserInfo: user, validators: validators.isEmpty ? nil : validators)
    }

    /// The avatar, resized by GitHub's `s=` parameter; only from the configured avatar hosts.
    public func fetchPhoto(profile: ProviderProfile, tokens: ProviderTokens, size: Int?) async throws -> ProviderPhoto {
        guard let source = profile.photoSourceURL, avatarHosts.allows(source) else {
            throw GatehouseError.noPhoto()
        }
        var url = source
        if let size {
            url += (url.contains("?") ? "&" : "?") + "s=\(size)"
        }
        return try await PhotoSource.openPublic(url, caller: "\(id)|\(profile.federatedId)", http: http)
    }

    /// The primary **verified** entry of `/user/emails`; otherwise the public email, marked
    /// verified only if `/user/emails` lists it as verified; otherwise none. An unverified
    /// address is never reported as verified (design §3–§4).
    static func chooseEmail(publicEmail: String?, emails: [JSONValue]) -> (String?, Bool) {
        if let primary = emails.first(where: { $0["primary"]?.boolValue == true && $0["verified"]?.boolValue == true }),
            let address = primary["email"]?.stringValue
        {
            return (address, true)
        }
        if let publicEmail {
            let verified = emails.contains { $0["email"]?.stringValue == publicEmail && $0["verified"]?.boolValue == true }
            return (publicEmail, verified)
        }
        return (nil, false)
    }

    /// `DELETE /applications/{client_id}/grant` with the app's Basic credentials: revokes
    /// every token of the grant, so the user sees the app gone from their GitHub settings.
    /// `404`/`422` mean the grant is already gone.
    public func revokeGrant(tokens: ProviderTokens) async throws {
        let credentials = Data("\(configuration.clientID):\(configuration.clientSecret)".utf8).base64EncodedString()
        let body = try JSONSerialization.data(withJSONObject: ["access_token": tokens.accessToken])
        var request = OutboundRequest(
            method: "DELETE", url: "\(configuration.apiBaseURL)/applications/\(configuration.clientID)/grant",
            headers: [
                "Authorization": "Basic \(credentials)", "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
                "Content-Type": "application/json",
            ], body: Array(body), maxResponseBytes: 64 << 10)
        // An unlink or a deletion revokes once, and does not retry: ahead of passthrough calls.
        request.priority = .high
        let response = try await http.execute(request, endpoint: .revocation)
        guard response.status == 204 || response.status == 404 || response.status == 422 else {
            throw UpstreamErrors.status(response, providerId: id)
        }
    }

    /// A GitHub API read; with `validator`, conditional (`If-None-Match`), and a `304` is an answer.
    private func api(_ path: String, tokens: ProviderTokens, validator: String? = nil) async throws -> OutboundResponse {
        if let wait = await rateLimits.wait(for: tokens.accessToken, now: clock.now()) {
            throw GatehouseError.upstreamRateLimited(id, retryAfter: wait)
        }
        var headers: OutboundHeaders = [
            "Authorization": "Bearer \(tokens.accessToken)", "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
        ]
        if let validator { headers.add("If-None-Match", validator) }
        var request = OutboundRequest(url: configuration.apiBaseURL + path, headers: headers, maxResponseBytes: 1 << 20)
        request.priority = .high  // a sign-in reads the profile: ahead of passthrough calls (`OutboundPriority.high`)
        let response = try await http.execute(request, endpoint: path.hasSuffix("/emails") ? .emails : .profile)
        // A primary or secondary limit: GitHub answering, not failing, and the grant is fine.
        if let limit = GitHubRateLimits.limit(status: response.status, headers: response.headers, body: response.body, now: clock.now()) {
            await rateLimits.hold(token: tokens.accessToken, limit, now: clock.now())
            throw GatehouseError.upstreamRateLimited(id, retryAfter: limit.retryAfter)
        }
        guard response.status == 200 || (validator != nil && response.status == 304) else {
            throw UpstreamErrors.status(response, providerId: id)
        }
        return response
    }

    /// The token response as JSON, or form-encoded when GitHub ignored the `Accept` header.
    private static func decodeTokenBody(_ response: OutboundResponse) -> [String: String] {
        if let json = try? JSONValue.parse(Data(response.body)), case .object(let object) = json {
            return object.compactMapValues { $0.stringValue ?? $0.integerValue.map(String.init) }
        }
        var result: [String: String] = [:]
        for (key, value) in FormEncoding.decode(response.bodyText) where result[key] == nil { result[key] = value }
        return result
    }
}
