import GatehouseCore
import HTTPTypes
import Hummingbird
import NIOCore

/// What browsers may do (design §4): CORS only for configured origins (credentials allowed,
/// never a wildcard or `null`), an allowed `Origin` on every cookie-authenticated state
/// change, and per-client rate limits on the sign-in, token and link routes.
///
/// A class: the middleware link and the routes share it, and every answer passes through it
/// by one reference rather than a copy of its six.
final class BrowserPolicy: Sendable {
    let origins: Set<String>
    let trustedProxies: TrustedProxies
    let limiter: RateLimiter
    /// Per signed-in user, on `/v1/me…`.
    let userLimiter: RateLimiter
    /// Per service key, on `/v1/users…`.
    let serviceLimiter: RateLimiter
    /// Per client, the session cookies and service keys that name nothing live.
    let credentialFailures: CredentialFailureLimit
    let clock: any GatehouseClock

    init(configuration: GatewayConfiguration) {
        userLimiter = RateLimiter(perMinute: configuration.userRateLimitPerMinute)
        serviceLimiter = RateLimiter(perMinute: configuration.serviceRateLimitPerMinute)
        credentialFailures = CredentialFailureLimit(perMinute: configuration.credentialFailureLimitPerMinute)
        clock = configuration.clock
        origins = Set(configuration.browserOrigins)
        // Checked by `GatewayConfiguration.validate()` before any server is built.
        trustedProxies = (try? TrustedProxies(parsing: configuration.trustedProxies)) ?? .none
        limiter = RateLimiter(perMinute: configuration.authRateLimitPerMinute)
    }

    /// The methods an allowed origin's script may use: the passthrough takes `PUT` and `PATCH`.
    static let allowedMethods = "GET, POST, PUT, PATCH, DELETE"
    /// The request headers it may send: credentials, and what the passthrough forwards
    /// (`ProviderAPIRequest.forwardedHeaders`).
    static let allowedHeaders = [
        "Authorization", "Content-Type", "Accept", "Accept-Language", "If-Match", "If-None-Match", "If-Modified-Since",
        "If-Unmodified-Since", "Prefer", "ConsistencyLevel", "X-GitHub-Api-Version",
    ].joined(separator: ", ")
    /// The answer headers it may read. A credentialed answer cannot expose `*`, nor a prefix,
    /// so the providers' rate-limit families are named header by header.
    static let exposedHeaders = [
        "Retry-After", "ETag", "Age", "Warning", "Last-Modified", "Link", "X-Request-Id", "Request-Id", "Client-Request-Id",
        "X-GitHub-Request-Id", "X-OAuth-Scopes", "X-Accepted-OAuth-Scopes", "X-RateLimit-Limit", "X-RateLimit-Remaining",
        "X-RateLimit-Reset", "X-RateLimit-Used", "X-RateLimit-Resource", "RateLimit", "RateLimit-Policy", "RateLimit-Limit",
        "RateLimit-Remaining", "RateLimit-Reset", "X-Ms-Throttle-Limit-Percentage", "X-Ms-Throttle-Scope", "X-Ms-Throttle-Information",
        "X-Ms-Ags-Diagnostic", "Preference-Applied", "OData-Version", "Content-Language", "X-GitHub-Media-Type",
    ].joined(separator: ", ")

    /// Whether `path` is the operators' console (`/admin`, `/admin/…`), which no other origin
    /// shares: an allowed origin is often of the same site as the gateway (`app.example.com`
    /// beside `auth.example.com`), so the console's `SameSite=Strict` cookie rides on its
    /// credentialed `fetch`, and CORS would let that page's scripts read every console page.
    /// The path's first non-empty segment decides, as the router skips empty ones
    /// (`//admin/users` is routed to `/admin/users`).
    static func isConsole(_ path: String) -> Bool {
        let slash = UInt8(ascii: "/")
        let bytes = path.utf8.drop { $0 == slash }
        guard bytes.starts(with: "admin".utf8) else { return false }
        let rest = bytes.dropFirst(5)
        return rest.isEmpty || rest.first == slash
    }

    /// The CORS preflight answer, or `nil` when the request is not a preflight.
    func preflight(_ request: Request) -> Response? {
        guard request.method == .options, let origin = request.headers[.origin],
            request.headers[.accessControlRequestMethod] != nil
        else { return nil }
        guard origins.contains(origin), !Self.isConsole(request.uri.path) else { return GatehouseError.originNotAllowed().problemResponse() }
        var response = Response(status: .noContent)
        response.headers[.accessControlAllowMethods] = Self.allowedMethods
        response.headers[.accessControlAllowHeaders] = Self.allowedHeaders
        response.headers[.accessControlMaxAge] = "600"
        // The CORS fields and `Vary` come with every answer's decoration (`decorate`).
        return response
    }

    /// Adds the CORS headers an allowed origin gets on every answer but the console's
    /// (`path`, the request's), and `Vary: Origin` to every such answer, with an `Origin` or
    /// without: a shared cache keeps the key set and the discovery document, and must not give
    /// an allowed app the copy it kept of an answer without the CORS fields.
    func decorate(_ response: inout Response, for request: Request, path: String) {
        guard !Self.isConsole(path) else { return }
        response.headers.append(HTTPField(name: .vary, value: "Origin"))
        guard let origin = request.headers[.origin], origins.contains(origin) else { return }
        response.headers[.accessControlAllowOrigin] = origin
        response.headers[.accessControlAllowCredentials] = "true"
        response.headers[.accessControlExposeHeaders] = Self.exposedHeaders
    }

    /// Throws `origin-not-allowed` for a cookie-authenticated change without an allowed
    /// `Origin` (a cross-site form or script riding on the cookie).
    func requireAllowedOrigin(_ request: Request, caller: SessionService.Caller?) throws {
        guard let caller, caller.viaCookie else { return }
        guard let origin = request.headers[.origin], origins.contains(origin) else { throw GatehouseError.originNotAllowed() }
    }

    /// Throws `origin-not-allowed` for a request that carries no bearer token (so it may ride
    /// on the cookie, signed in or not) without an allowed `Origin`.
    func requireAllowedOrigin(_ request: Request) throws {
        guard request.headers[.authorization] == nil else { return }
        guard let origin = request.headers[.origin], origins.contains(origin) else { throw GatehouseError.originNotAllowed() }
    }

    /// Throws `origin-not-allowed` when a cookie-authenticated request comes from another
    /// site: an `Origin` outside the allowed set, or no `Origin` and the browser's
    /// `Sec-Fetch-Site: cross-site` (what a top-level navigation from another site sends).
    func refuseCrossSite(_ request: Request, caller: SessionService.Caller?) throws {
        guard let caller, caller.viaCookie, try !hasAllowedOrigin(request) else { return }
        if request.headers[.secFetchSite]?.lowercased() == "cross-site" { throw GatehouseError.originNotAllowed() }
    }

    /// Throws `origin-not-allowed` unless a cookie-authenticated navigation shows that it
    /// leaves an allowed page: an allowed `Origin` (a script's `fetch`), the browser's
    /// `Sec-Fetch-Site: same-origin`, or a `Referer` on an allowed origin.
    ///
    /// Stricter than `refuseCrossSite`: older browsers send no Fetch Metadata, and a top-level
    /// navigation sends no `Origin`, so a page on another site that navigates the user to a
    /// link or re-authentication start would pass a check that refuses only what is marked
    /// cross-site. `same-site` (a sibling host, not necessarily an allowed one) and `none` (a
    /// link opened from outside the browser, such as an email) need the `Referer` too.
    func requireNavigationFromAllowedPage(_ request: Request, caller: SessionService.Caller?) throws {
        guard let caller, caller.viaCookie, try !hasAllowedOrigin(request) else { return }
        if request.headers[.secFetchSite]?.lowercased() == "same-origin" { return }
        guard let referer = request.headers[.referer], let origin = URLAllowList.webOrigin(of: referer), origins.contains(origin)
        else { throw GatehouseError.originNotAllowed() }
    }

    /// Whether a navigation shows that it leaves a page that is not an allowed one: an `Origin`
    /// outside the allowed set, a `Referer` on another origin, or no `Referer` from a browser
    /// that marks its navigations (`Sec-Fetch-Site` other than `same-origin`: another site, a
    /// sibling host, a link opened from an email). A request that shows neither (a program
    /// such as curl or an app's HTTP library; a browser too old for Fetch Metadata whose page
    /// sent no `Referer`) does not.
    func navigationFromElsewhere(_ request: Request) -> Bool {
        if let origin = request.headers[.origin] { return !origins.contains(origin) }
        let site = request.headers[.secFetchSite]?.lowercased()
        if site == "same-origin" { return false }
        if let referer = request.headers[.referer] {
            guard let origin = URLAllowList.webOrigin(of: referer) else { return true }
            return !origins.contains(origin)
        }
        return site != nil
    }

    /// Whether the request's `Origin` is an allowed one: `false` without the field, and
    /// `origin-not-allowed` thrown for any other origin (`null` included), which no later check
    /// of the request may then overrule.
    private func hasAllowedOrigin(_ request: Request) throws -> Bool {
        guard let origin = request.headers[.origin] else { return false }
        guard origins.contains(origin) else { throw GatehouseError.originNotAllowed() }
        return true
    }

    /// Throws `rate-limited` (with `Retry-After`) when a signed-in user used up the budget
    /// of `/v1/me…`.
    func limit(user uid: String) async throws {
        if let wait = await userLimiter.acquire(uid, now: clock.now()) { throw GatehouseError.rateLimited(retryAfter: wait) }
    }

    /// The request's service key, authorized for `scope` and within its rate limit: throws
    /// `unauthenticated` / `forbidden` for a missing or narrower key, `rate-limited` (with
    /// `Retry-After`) when the key used up the budget of the service and admin routes.
    func serviceKey(_ context: GatehouseRequestContext, scope: String) async throws -> ServiceKeyRecord {
        let key = try await context.requireService(scope: scope)
        if let wait = await serviceLimiter.acquire(key.id, now: clock.now()) { throw GatehouseError.rateLimited(retryAfter: wait) }
        return key
    }

    /// Throws `rate-limited` (with `Retry-After`) when this client (an IPv6 client's /64) used
    /// up `group`'s budget.
    func limit(_ group: String, _ request: Request, _ context: GatehouseRequestContext) async throws {
        if let wait = await limiter.acquire("\(group)|\(TrustedProxies.network(of: client(request, context)))", now: clock.now()) {
            throw GatehouseError.rateLimited(retryAfter: wait)
        }
    }

    /// The client's address: the peer, or the right-most untrusted `X-Forwarded-For` hop when
    /// the peer is a trusted proxy (`TrustedProxies`).
    func client(_ request: Request, _ context: GatehouseRequestContext) -> String {
        client(peer: context.remoteAddress, forwardedFor: request.headers[values: .xForwardedFor])
    }

    /// The client's address from the peer and the request's `X-Forwarded-For` values.
    func client(peer: SocketAddress?, forwardedFor: [String]) -> String {
        trustedProxies.client(peer: peer?.ipAddress ?? "unknown", forwardedFor: forwardedFor)
    }

    /// Throws `rate-limited` (with `Retry-After`) while the client is out of its budget of
    /// credentials naming nothing live (`CredentialFailureLimit`): called before a session
    /// cookie or service key is looked up. `client` is read only while some client is out of
    /// budget.
    func admitCredential(client: () -> String) throws {
        if let wait = credentialFailures.wait(now: clock.now(), client: client) { throw GatehouseError.rateLimited(retryAfter: wait) }
    }

    /// Counts a session cookie or service key of `client` that named nothing live.
    func credentialFailed(client: String) {
        credentialFailures.failed(client: client, now: clock.now())
    }

    /// The caller behind a session cookie's value that the request's credentials do not carry
    /// (the console's own cookie, a bearer sign-out's cookie): looked up within the client's
    /// budget, like `GatehouseRequestContext.user()`.
    func caller(
        sessionCookie value: String?, in sessions: SessionService, _ request: Request, _ context: GatehouseRequestContext
    ) async throws -> SessionService.Caller? {
        guard let value, !value.isEmpty else { return nil }
        try admitCredential { client(request, context) }
        guard let caller = try await sessions.caller(sessionCookie: value) else {
            credentialFailed(client: client(request, context))
            return nil
        }
        return caller
    }

    /// The client completing a sign-in, as the hooks are told it.
    func signInClient(_ request: Request, _ context: GatehouseRequestContext) -> SignInClient {
        SignInClient(address: client(request, context), userAgent: request.headers[.userAgent])
    }
}
