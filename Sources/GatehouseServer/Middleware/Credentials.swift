import GatehouseCore
import HTTPTypes
import Hummingbird

/// Reads what a request presents to prove who it is: the `Authorization` header and the
/// session cookie. Nothing is checked here (most routes need no caller, and a stray header
/// must not fail `/healthz`); routes ask the context, which checks the credential they need:
/// `user()`, `requireUser()`, `requireService(scope:)`.
struct CredentialReader: Sendable {
    let checks: CredentialChecks
    let cookies: CookiePolicy

    init(sessions: SessionService, serviceKeys: ServiceKeyService, cookies: CookiePolicy, browser: BrowserPolicy) {
        checks = CredentialChecks(sessions: sessions, serviceKeys: serviceKeys, browser: browser)
        self.cookies = cookies
    }

    /// The request's credentials, unchecked.
    func read(_ request: Request) -> Credentials {
        Credentials(
            authorization: request.field(.authorization), sessionCookie: request.cookie(cookies.sessionName),
            // Only behind a trusted proxy does the client's address need a field of the request,
            // kept whole (one reference) and read only when the address is.
            fields: checks.browser.trustedProxies.isEmpty ? nil : request.headers, checks: checks)
    }
}

/// The services that check a request's credentials, shared by every request: a context is
/// copied at each link of the chain, and one reference costs less to copy than every field of
/// both services (a tenth of the context's copying in perf of `/v1/me`).
final class CredentialChecks: Sendable {
    /// Checks session cookies and gateway ID tokens.
    let sessions: SessionService
    /// Checks service keys.
    let serviceKeys: ServiceKeyService
    /// Who the client is behind the trusted proxies, and its budget of credentials naming
    /// nothing live.
    let browser: BrowserPolicy

    init(sessions: SessionService, serviceKeys: ServiceKeyService, browser: BrowserPolicy) {
        self.sessions = sessions
        self.serviceKeys = serviceKeys
        self.browser = browser
    }
}

/// A request's credentials and the services that check them.
struct Credentials: Sendable {
    /// The raw `Authorization` header, if sent.
    var authorization: String?
    /// The session cookie's value, if sent.
    var sessionCookie: String?
    /// The request's fields when some proxy is trusted (`nil` otherwise: the peer is the
    /// client), whose `X-Forwarded-For` is read only to name a client for its credential budget.
    var fields: HTTPFields?
    /// What checks them; `nil` when there is nothing to check: the request presented no
    /// credential, or no middleware saw the context. Either way `user()` is `nil` and
    /// `requireService(scope:)` is `401`, as they are for a request without credentials.
    let checks: CredentialChecks?

    /// No credentials: what a request that presents none carries, and a context no middleware saw.
    static let none = Credentials(authorization: nil, sessionCookie: nil, fields: nil, checks: nil)

    /// Whether the request presented no credential at all (`CredentialReader` reads every
    /// kind it knows into this value, so this is the one place that lists them).
    var presentsNone: Bool { authorization == nil && sessionCookie == nil }

    /// The gateway ID token of `Authorization: Bearer <token>`, or `invalid-id-token`. Out of
    /// line from `user()`, whose async frame is allocated whole on every signed-in request.
    @inline(never)
    func idToken() throws -> String {
        guard let token = bearer(limit: 8 << 10) else { throw GatehouseError.invalidIdToken("Authorization must be \"Bearer <ID token>\".") }
        return token
    }

    /// The token of `Authorization: Bearer <token>`, if the header has that form and at most `limit` bytes.
    func bearer(limit: Int) -> String? {
        guard let authorization, authorization.utf8.count <= limit else { return nil }
        // On the bytes: Foundation's case folding and trimming cost a twentieth of a /v1/me
        // request (perf, release build).
        let bytes = authorization.utf8
        guard bytes.count > 7, bytes.prefix(6).lazy.map({ $0 | 0x20 }).elementsEqual("bearer".utf8), bytes.dropFirst(6).first == UInt8(ascii: " ")
        else { return nil }
        // Trimmed in place: the token's one allocation is its string (a copy of the bytes first
        // was two more on every keyed or bearer request).
        let token = bytes.dropFirst(7)
        let isSpace: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        guard let first = token.firstIndex(where: { !isSpace($0) }), let last = token.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(decoding: token[first...last], as: UTF8.self)
    }
}

extension GatehouseRequestContext {
    /// The signed-in user: the gateway ID token when `Authorization` is sent (an invalid one
    /// is `401`, never a silent fall-back to the cookie), else the session cookie; `nil` when
    /// neither names a live session.
    func user() async throws -> SessionService.Caller? {
        guard let checks = credentials.checks else { return nil }
        let caller: SessionService.Caller?
        if credentials.authorization != nil {
            // Never counted nor refused: a forged or expired ID token fails its signature or its
            // times before any look-up.
            caller = try await checks.sessions.caller(idToken: try credentials.idToken())
        } else {
            caller = try await checks.sessions.caller(sessionCookie: try admittedCookie(checks))
            if caller == nil { cookieFailed(checks) }
        }
        if let caller { RequestScope.user(caller.uid) }
        return caller
    }

    /// The signed-in user, or `401 unauthenticated`.
    func requireUser() async throws -> SessionService.Caller {
        guard let caller = try await user() else { throw GatehouseError.unauthenticated() }
        return caller
    }

    /// The service key of `Authorization: Bearer <key>`, holding `scope`: `401
    /// unauthenticated` without a valid key, `403 permission-denied` without the scope.
    func requireService(scope: String) async throws -> ServiceKeyRecord {
        guard let checks = credentials.checks else { throw GatehouseError.unauthenticated() }
        try admitCredential(checks)
        let secret = credentials.bearer(limit: 512)
        let key: ServiceKeyRecord
        do {
            key = try await checks.serviceKeys.authorize(secret: secret, scope: scope)
        } catch let error as GatehouseError where error.code == .unauthenticated {
            // Only a secret of the keys' form is looked up.
            if secret?.hasPrefix(ServiceKeyService.secretPrefix) == true { credentialFailed(checks) }
            throw error
        }
        RequestScope.serviceKey(key.id)
        return key
    }

    /// The session cookie to look up (`nil` when none was sent), within the client's budget.
    /// Out of line from `user()`, whose async frame the connection's task keeps.
    @inline(never)
    private func admittedCookie(_ checks: CredentialChecks) throws -> String? {
        guard let cookie = credentials.sessionCookie, !cookie.isEmpty else { return nil }
        try admitCredential(checks)
        return cookie
    }

    /// Counts the session cookie just looked up as naming nothing live, if one was sent.
    @inline(never)
    private func cookieFailed(_ checks: CredentialChecks) {
        if credentials.sessionCookie?.isEmpty == false { credentialFailed(checks) }
    }

    /// Throws `rate-limited` (with `Retry-After`) while the client is out of its budget of
    /// credentials naming nothing live (`CredentialFailureLimit`): before any look-up.
    private func admitCredential(_ checks: CredentialChecks) throws {
        try checks.browser.admitCredential { clientAddress(checks) }
    }

    /// Counts a credential of this request's client that named nothing live.
    private func credentialFailed(_ checks: CredentialChecks) {
        checks.browser.credentialFailed(client: clientAddress(checks))
    }

    /// The client's address, as `BrowserPolicy.client` reads it from the request.
    private func clientAddress(_ checks: CredentialChecks) -> String {
        checks.browser.client(peer: remoteAddress, forwardedFor: credentials.fields?[values: .xForwardedFor] ?? [])
    }
}
