import CurlClient
import Foundation
import Logging

/// Any OpenID Connect provider (and the Yahoo preset): discovery, code flow with PKCE, state
/// and nonce, full ID-token validation, userinfo whose `sub` must match (providers.md §3, §6).
public struct OIDCProvider: IdentityProvider {
    /// The provider id (`oidc.<name>` or `yahoo.com`).
    public var id: String { configuration.providerId }
    let configuration: OIDCProviderConfiguration
    let http: UpstreamHTTP
    let developmentMode: Bool
    /// Discovery and keys, shared by every request to this provider.
    let metadata: IssuerMetadataCache
    let validator: IDTokenValidator
    /// Where the time comes from.
    let clock: any GatehouseClock
    /// Whether the provider accepts the gateway's client registration (for `/readyz`).
    let health: ProviderHealth

    /// Creates the provider over the shared libcurl client.
    public init(
        configuration: OIDCProviderConfiguration, http: UpstreamHTTP, developmentMode: Bool, clock: any GatehouseClock = SystemClock(),
        health: ProviderHealth? = nil, logger: Logger
    ) {
        self.clock = clock
        self.health = health ?? ProviderHealth(logger: logger)
        self.configuration = configuration
        self.http = http
        self.developmentMode = developmentMode
        metadata = IssuerMetadataCache(
            configuration: configuration, http: http, developmentMode: developmentMode, clock: clock, logger: logger)
        validator = IDTokenValidator(configuration: configuration, metadata: metadata)
    }

    /// The configured scopes, `openid` first.
    public var defaultScopes: [String] { ["openid"] + configuration.defaultScopes.filter { $0 != "openid" } }
    /// OpenID Connect's `login`: the credentials again, not the provider's own session.
    public var reauthenticationPrompt: String? { "login" }
    /// Yes: `max_age` is OpenID Connect Core's, and with it `auth_time`.
    public var acceptsMaxAge: Bool { true }

    /// The discovered authorization endpoint with code + PKCE S256 + state + nonce.
    public func authorizationRedirect(for request: AuthorizationRequest) async throws -> AuthorizationRedirect {
        guard configuration.codeFlowEnabled else {
            throw GatehouseError.operationNotAllowed(
                "\(configuration.providerId) is configured for ID-token sign-in only (no client secret): send its ID token to POST /v1/auth/idtoken.")
        }
        let document = try await metadata.discovery()
        var pairs: [(String, String)] = [
            ("client_id", configuration.clientID),
            ("redirect_uri", request.redirectURI),
            ("response_type", "code"),
            ("scope", request.scopes.joined(separator: " ")),
            ("state", request.state),
            ("nonce", request.nonce),
            ("code_challenge", request.codeChallenge),
            ("code_challenge_method", "S256"),
        ]
        pairs += request.customParameters
        let separator = document.authorizationEndpoint.contains("?") ? "&" : "?"
        return AuthorizationRedirect(url: document.authorizationEndpoint + separator + FormEncoding.encode(pairs))
    }

    /// Checks RFC 9207 `iss`, redeems the code once, validates the ID token, then reads userinfo.
    public func completeSignIn(_ callback: CallbackParameters) async throws -> ProviderSignIn {
        let exchanged = try await exchange(callback)
        return ProviderSignIn(
            tokens: exchanged.tokens, profile: OIDCProfileMapper.profile(providerId: id, claims: exchanged.claims, userInfo: exchanged.userInfo),
            idTokenClaims: exchanged.claims)
    }

    /// The code flow's wire part, shared with providers that build their profile elsewhere
    /// (Microsoft reads Graph): validated claims, tokens, and userinfo when used.
    func exchange(_ callback: CallbackParameters) async throws -> (claims: IDTokenClaims, tokens: ProviderTokens, userInfo: JSONValue?) {
        let document = try await metadata.discovery()
        // RFC 9207: required when advertised; when present anyway it must still be right.
        if document.authorizationResponseIssParameterSupported == true || callback.issuer != nil {
            guard callback.issuer == configuration.issuer else {
                throw GatehouseError.invalidIdPResponse("The authorization response's iss does not name the expected issuer.")
            }
        }
        let answer = try await tokenRequest(
            [
                ("grant_type", "authorization_code"), ("code", callback.code), ("redirect_uri", callback.redirectURI),
                ("code_verifier", callback.codeVerifier),
            ], endpoint: document.tokenEndpoint, authMethods: document.tokenEndpointAuthMethodsSupported)
        guard let idToken = answer["id_token"]?.stringValue else {
            throw GatehouseError.invalidIdPResponse("\(id)'s token answer has no ID token.")
        }
        let claims = try await validator.validate(idToken, nonce: .exact(callback.nonce), now: clock.now())
        guard let accessToken = answer["access_token"]?.stringValue, !accessToken.isEmpty else {
            throw GatehouseError.invalidIdPResponse("\(id)'s token answer has no access token.")
        }
        let tokens = tokens(from: answer, accessToken: accessToken, previous: nil)
        var userInfo: JSONValue?
        if configuration.usesUserInfo, let endpoint = document.userinfoEndpoint {
            userInfo = try await self.userInfo(endpoint: endpoint, accessToken: accessToken, expectedSubject: claims.subject)
        }
        return (claims, tokens, userInfo)
    }

    /// The refresh-token grant; a rotated refresh token replaces the old one, and any
    /// `error` (`invalid_grant` above all) means the grant is gone.
    public func refresh(_ tokens: ProviderTokens) async throws -> ProviderTokens {
        guard let refreshToken = tokens.refreshToken else { throw GatehouseError.providerReauthRequired(id) }
        let document = try await metadata.discovery()
        let response = try await tokenResponse(
            [("grant_type", "refresh_token"), ("refresh_token", refreshToken)], endpoint: document.tokenEndpoint,
            authMethods: document.tokenEndpointAuthMethodsSupported)
        let answer = try? JSONValue.parse(Data(response.body))
        guard response.status == 200, let answer, answer["error"] == nil, let accessToken = answer["access_token"]?.stringValue,
            !accessToken.isEmpty
        else {
            // Only the grant's own death ends the link (RefreshRefusal).
            throw RefreshRefusal.error(
                status: response.status, body: response.body, headers: response.headers, providerId: id, health: health,
                tenantsRefuseClients: configuration.tenantsRefuseClients)
        }
        health.recovered()
        return self.tokens(from: answer, accessToken: accessToken, previous: tokens)
    }

    /// Tokens from a token-endpoint answer; what the answer leaves out is kept from `previous`.
    func tokens(from answer: JSONValue, accessToken: String, previous: ProviderTokens?) -> ProviderTokens {
        let scopes = answer["scope"]?.stringValue.map { $0.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init) }
        return ProviderTokens(
            accessToken: accessToken, refreshToken: answer["refresh_token"]?.stringValue ?? previous?.refreshToken,
            expiresAt: ProviderTokens.expiry(expiresIn: answer["expires_in"]?.numberValue, now: clock.now().timeIntervalSince1970),
            scopes: scopes ?? previous?.scopes ?? [], context: previous?.context)
    }

    /// Validates an ID token obtained elsewhere; with `rawNonce`, its `nonce` must match it.
    public func signIn(idToken: String, rawNonce: String?) async throws -> ProviderSignIn {
        let nonce: IDTokenValidator.ExpectedNonce = rawNonce.map { .raw($0, configuration.nonceComparison) } ?? .none
        let claims = try await validator.validate(idToken, nonce: nonce, now: clock.now(), acceptsPlatformClients: true)
        // No access token comes with an ID-token sign-in, so there is nothing to store or refresh.
        return ProviderSignIn(
            tokens: ProviderTokens(accessToken: "", scopes: []),
            profile: OIDCProfileMapper.profile(providerId: id, claims: claims, userInfo: nil), idTokenClaims: claims)
    }

    /// The discovery problem that disabled the provider, or a refused client registration.
    public func readinessProblem() async -> String? {
        if let problem = health.readinessProblem { return problem }
        do {
            _ = try await metadata.discovery()
            return nil
        } catch let error as GatehouseError {
            return await metadata.disabledReason ?? error.detail
        } catch {
            return "\(id): discovery failed."
        }
    }

    /// `readinessProblem()` within `limit`. A cold cache fetches the discovery document, and a
    /// provider that is slow or down would hold a probe for the upstream timeout, past any load
    /// balancer's probe timeout, and take every instance out of rotation with it: past `limit`
    /// the fetch goes on (its callers share it, and it fills the cache for the next probe), and
    /// the probe is told why the provider was last disabled, or, without a document to serve
    /// meanwhile (an expired one serves a slow refresh), that its discovery is awaited.
    public func readinessProblem(within limit: Duration) async -> String? {
        if let answer = await Deadline.answer(within: limit, { await self.readinessProblem() }) { return answer }
        if let reason = await metadata.disabledReason { return reason }
        return await metadata.holdsDocument ? nil : "\(id): its discovery document did not come within \(limit)."
    }

    /// The live profile from userinfo; the caller checks that `sub` is the linked identity.
    public func fetchProfile(tokens: ProviderTokens) async throws -> ProviderProfile {
        guard !tokens.accessToken.isEmpty else {
            throw GatehouseError.providerReauthRequired(id)
        }
        guard let endpoint = try await metadata.discovery().userinfoEndpoint else {
            throw GatehouseError.operationNotAllowed("\(id) has no userinfo endpoint; /v1/me holds the profile of the last sign-in.")
        }
        let info = try await userInfo(endpoint: endpoint, accessToken: tokens.accessToken, expectedSubject: nil)
        guard let subject = info["sub"]?.stringValue else {
            throw GatehouseError.invalidIdPResponse("\(id)'s userinfo answer has no sub.")
        }
        return OIDCProfileMapper.profile(providerId: id, subject: subject, claims: nil, userInfo: info)
    }

    /// Whether the answer the profile came from carries `email_verified` (userinfo's, or at
    /// sign-in the ID token's): an explicit `false` unverifies an address verified before.
    public func statesEmailVerification(in profile: ProviderProfile) -> Bool {
        switch profile.rawUserInfo["email_verified"] {
        case .bool?, .string?: true
        default: false  // absent, or `null`: says nothing
        }
    }

    /// The `picture`, fetched without a token, from an allowed place only.
    public func fetchPhoto(profile: ProviderProfile, tokens: ProviderTokens, size: Int?) async throws -> ProviderPhoto {
        guard let source = profile.photoSourceURL, pictureAllowed(source) else { throw GatehouseError.noPhoto() }
        return try await PhotoSource.openPublic(source, caller: "\(id)|\(profile.federatedId)", http: http)
    }

    /// The `picture` must be on the issuer's own origin or under a configured prefix (parsed,
    /// on a segment boundary), and `https` (loopback `http` in development mode).
    private func pictureAllowed(_ url: String) -> Bool {
        guard (try? EndpointPolicy.check(url, developmentMode: developmentMode)) != nil else { return false }
        let issuerOrigin = URLAllowList.parse(configuration.issuer).map { [$0.origin + "/"] } ?? []
        return URLAllowList(configuration.pictureURLPrefixes + issuerOrigin).allows(url)
    }

    // MARK: Wire

    /// A token request; never retried. RFC 6749 errors (Yahoo's upper-case codes too) become
    /// `invalid-idp-response` naming the provider's code, never echoing the request.
    private func tokenRequest(_ parameters: [(String, String)], endpoint: String, authMethods: [String]?) async throws -> JSONValue {
        let response = try await tokenResponse(parameters, endpoint: endpoint, authMethods: authMethods)
        let body = try? JSONValue.parse(Data(response.body))
        if let error = body?["error"]?.stringValue {
            if RefreshRefusal.misconfigures(error, tenantsRefuseClients: configuration.tenantsRefuseClients) {
                throw health.misconfigured(id, reason: "its token endpoint refused the gateway's client credentials (\(error.prefix(32)))")
            }
            throw GatehouseError.invalidIdPResponse("\(id) refused the token request (\(error.truncated(toBytes: 64).debugDescription)).")
        }
        guard response.status == 200, let body, case .object = body else {
            if response.status >= 500 || response.status == 429 { throw UpstreamErrors.status(response, providerId: id) }
            throw GatehouseError.invalidIdPResponse("\(id) answered the token request with HTTP \(response.status).")
        }
        health.recovered()
        return body
    }

    /// The token endpoint's raw answer to `parameters`, with the client authenticated.
    private func tokenResponse(_ parameters: [(String, String)], endpoint: String, authMethods: [String]?) async throws -> OutboundResponse {
        var form = parameters
        var headers: OutboundHeaders = ["Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"]
        switch clientAuthentication(supported: authMethods) {
        case .clientSecretBasic:
            // RFC 6749 §2.3.1: both parts form-encoded before Base64.
            let credentials = "\(FormEncoding.escape(configuration.clientID)):\(FormEncoding.escape(configuration.clientSecret))"
            headers.add("Authorization", "Basic \(Data(credentials.utf8).base64EncodedString())")
        case .clientSecretPost:
            form += [("client_id", configuration.clientID), ("client_secret", configuration.clientSecret)]
        }
        var request = OutboundRequest(
            method: "POST", url: endpoint, headers: headers, body: Array(FormEncoding.encode(form).utf8), maxResponseBytes: 64 << 10)
        request.priority = .high  // sign-ins and refreshes: ahead of passthrough calls (`OutboundPriority.high`)
        return try await http.execute(request, endpoint: .token)
    }

    private func clientAuthentication(supported: [String]?) -> OIDCProviderConfiguration.ClientAuthentication {
        if let configured = configuration.clientAuthentication { return configured }
        guard let supported, !supported.isEmpty else { return .clientSecretBasic }  // Core §9 default
        return supported.contains("client_secret_basic") || !supported.contains("client_secret_post") ? .clientSecretBasic : .clientSecretPost
    }

    /// GETs userinfo with the bearer token; when `expectedSubject` is set, a different `sub`
    /// fails the sign-in (Core §5.3.2).
    private func userInfo(endpoint: String, accessToken: String, expectedSubject: String?) async throws -> JSONValue {
        var request = OutboundRequest(
            url: endpoint, headers: ["Authorization": "Bearer \(accessToken)", "Accept": "application/json"], maxResponseBytes: 256 << 10)
        request.priority = .high  // a sign-in reads the profile: ahead of passthrough calls (`OutboundPriority.high`)
        let response = try await http.execute(request, endpoint: .userinfo)
        guard response.status == 200 else { throw UpstreamErrors.status(response, providerId: id) }
        guard let info = try? JSONValue.parseRepeated(response.body), case .object = info else {
            throw GatehouseError.invalidIdPResponse("\(id)'s userinfo answer is not a JSON object.")
        }
        if let expectedSubject, info["sub"]?.stringValue != expectedSubject {
            throw GatehouseError.invalidIdPResponse("\(id)'s userinfo describes another subject than the ID token.")
        }
        return info
    }
}
