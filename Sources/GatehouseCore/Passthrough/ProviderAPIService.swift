import CurlClient
import Foundation

/// Calls beyond the profile: a provider API call made with a user's stored grant, under the
/// operator's policy (`APIPolicy`), and the token vault that hands services a fresh access
/// token. The caller never sends or receives the provider's token on the passthrough path.
///
/// A class for the reason `ProfileService` is one: it holds the whole configuration and the
/// profile service, shared by one reference.
public final class ProviderAPIService: Sendable {
    /// The policy and the providers' API bases.
    let configuration: GatewayConfiguration
    /// The grants: enabled accounts, links, tokens refreshed through the single flight.
    let profiles: ProfileService
    /// The configured providers (and their refresh).
    let providers: ProviderRegistry
    /// Each provider's view of the libcurl client.
    let upstream: [String: UpstreamHTTP]
    /// One breaker per API host, apart from the sign-in and profile breakers.
    let hosts: HostBreakers
    /// Where each call and each token handed out is recorded.
    let audit: AuditLog
    /// Where calls are counted.
    let metrics: GatehouseMetrics
    /// Each provider's API origin (its breaker's key), parsed once.
    let apiOrigins: [String: String]
    /// The answers read whole before they are passed on (Graph's JSON, to move its paging
    /// links; a refusal, to learn why), held until written: `GATEHOUSE_API_BUFFER_BYTES`
    /// across every call in flight.
    let answerBytes: ByteBudget

    /// The service over the core's parts (built by `Gatehouse`).
    init(
        configuration: GatewayConfiguration, profiles: ProfileService, providers: ProviderRegistry, upstream: [String: UpstreamHTTP],
        hosts: HostBreakers, audit: AuditLog, metrics: GatehouseMetrics
    ) {
        self.configuration = configuration
        self.profiles = profiles
        self.providers = providers
        self.upstream = upstream
        self.hosts = hosts
        self.audit = audit
        self.metrics = metrics
        var origins: [String: String] = [:]
        for id in providers.ids {
            if let base = configuration.apiBaseURL(for: id) { origins[id] = HostBreakers.origin(of: base) }
        }
        apiOrigins = origins
        // A service key's share is a quarter of the budget (at least one answer as large as the
        // policy allows: checked at start). Signed-in users (anyone may become one) hold at most
        // half of it together, each an eighth or one answer: callers reading slowly cannot hold
        // the services' calls off, and a few accounts cannot hold every other user's.
        let budget = configuration.apiBufferBytes
        let largest = configuration.api.providers["microsoft.com"]?.maxResponseBytes ?? 0
        answerBytes = ByteBudget(limit: budget, ownerLimit: budget / 4, groupLimit: budget / 2, groupOwnerLimit: max(budget / 8, largest)) {
            [metrics] in metrics.apiBufferedBytes($0)
        }
    }

    /// Who asks: a service on a user's behalf, or the signed-in user.
    public enum Caller: Sendable {
        /// An internal service's key (scope `api:<provider>`).
        case service(keyId: String)
        /// The signed-in user, on `/v1/me/…` (allowed per provider).
        case user

        func actor(uid: String) -> AuditActor {
            switch self {
            case .service(let keyId): .serviceKey(keyId)
            case .user: .user(uid)
            }
        }

        /// Whether the signed-in user calls (anyone may become one).
        var isUser: Bool {
            if case .user = self { return true }
            return false
        }

        /// Who the host's breaker counts a failure against: the key, or the signed-in user.
        func breakerIdentity(uid: String) -> String {
            switch self {
            case .service(let keyId): "key:" + keyId
            case .user: "user:" + uid
            }
        }
    }

    /// A call the policy allows, as `authorize` decided it. Only `authorize` makes one, and
    /// `call` sends the method, path and query it holds: a call is sent as it was checked, and
    /// checked once.
    public struct AllowedCall: Sendable {
        /// The provider whose API is called.
        public let providerId: String
        /// The method.
        public let method: APIMethod
        /// The provider API path.
        public let path: APIPath
        /// The raw query string, without `?`.
        public let query: String?
        /// Who calls.
        public let caller: Caller
        /// The template allowing the call.
        public let template: APITemplate
        /// The provider's limits.
        public let limits: APIPolicy.Provider
    }

    /// The template allowing the call (its path and the names of its `query`, the raw query
    /// string without `?`) and the provider's limits, or `path-not-allowed` — decided before
    /// anything is read or sent, so a refused call costs no upstream call. A query a URL cannot
    /// carry is `invalid-argument`.
    public func authorize(providerId: String, method: APIMethod, path: APIPath, query: String?, caller: Caller) throws -> AllowedCall {
        try Self.checkQuery(query)
        _ = try providers.provider(providerId)
        guard let policy = configuration.api.providers[providerId] else {
            throw GatehouseError.pathNotAllowed("This gateway allows no \(providerId) API calls.")
        }
        if case .user = caller, !policy.signedInUsers {
            throw GatehouseError.pathNotAllowed("This gateway does not let signed-in users call the \(providerId) API themselves.")
        }
        guard let template = policy.template(for: method, path, query: query?[...]) else {
            if let matched = policy.template(for: method, path), let name = matched.refusedParameter(in: query?[...]) {
                throw GatehouseError.pathNotAllowed(
                    "The query parameter \(String(name.prefix(64)).debugDescription) is not among those \(matched) takes (the \(providerId) API policy names them; $expand only where it is listed)."
                )
            }
            throw GatehouseError.pathNotAllowed("\(method.rawValue) \(path) is not among the allowed \(providerId) API calls.")
        }
        return AllowedCall(providerId: providerId, method: method, path: path, query: query, caller: caller, template: template, limits: policy)
    }

    /// Makes the call with the user's stored token (refreshed when expired, or once after a
    /// `401`, then retried once; a streamed body over its replay limit cannot be sent twice, and
    /// that retry answers `503` so the caller sends it again) and answers the provider's status, passed headers and body,
    /// with paging links moved under `gatewayBase` (the passthrough route's URL up to `/api`,
    /// built only for an answer that may carry such links). `headers` are the caller's fields and
    /// `body` its body, streamed within the policy's cap. The HTTP layer records the call
    /// (`record`) with the status it answered.
    public func call(
        _ allowed: AllowedCall, headers: [(name: String, value: String)], body: OutboundUpload?, uid: String,
        gatewayBase: @autoclosure () -> String
    ) async throws -> ProviderAPIAnswer {
        try await send(
            ProviderAPIRequest(method: allowed.method, path: allowed.path, query: allowed.query, headers: headers, body: body),
            template: allowed.template, limits: allowed.limits, uid: uid, providerId: allowed.providerId, caller: allowed.caller,
            gatewayBase: gatewayBase)
    }

    /// One audit line and one metric per passthrough call, answered or refused: the template
    /// that allowed it (`not-allowed` when none did; never the raw path) and the status the
    /// caller got.
    public func record(
        uid: String, providerId: String, caller: Caller, method: APIMethod, template: APITemplate?, status: Int, insufficientScope: Bool = false
    ) {
        let label = template?.description ?? "not-allowed"
        // A provider id none is configured with is the caller's text, as long as a request
        // head allows: the audit line keeps its start, the metric none of it.
        let known = (try? providers.provider(providerId)) != nil
        // A service key's path names any uid: one no account has is as long as the caller
        // made it (an account's is far shorter).
        let uid = uid.truncated(toBytes: 128)
        audit.record(
            .providerAPICalled, by: caller.actor(uid: uid), uid: uid, provider: known ? providerId : providerId.truncated(toBytes: 64),
            call: AuditedCall(method: method.rawValue, template: label, status: status))
        guard known else { return }  // labels stay a bounded set
        metrics.providerAPICall(
            providerId: providerId, template: label, outcome: insufficientScope ? "insufficient-scope" : UpstreamHTTP.outcome(status: status))
    }

    private func send(
        _ request: ProviderAPIRequest, template: APITemplate, limits: APIPolicy.Provider, uid: String, providerId: String, caller: Caller,
        gatewayBase: () -> String
    ) async throws -> ProviderAPIAnswer {
        _ = try await profiles.enabledAccount(uid)
        let link = try await profiles.link(uid: uid, providerId: providerId)
        let provider = try providers.provider(providerId)
        guard let base = configuration.apiBaseURL(for: providerId), let http = upstream[providerId] else {
            throw GatehouseError.pathNotAllowed("This gateway allows no \(providerId) API calls.")
        }
        let writeHold = try admitWrite(request.method, providerId: providerId, caller: caller, uid: uid, limits: limits)
        let prepared = Self.outbound(request, base: base, limits: limits, uid: uid)
        let refused = { @Sendable (origin: String, retryAfter: Int?) in
            // The host's address is the operator's (an OpenID provider's API may be an internal
            // name): logged, never shown to the caller.
            var refusal = GatehouseError.upstreamUnavailable(
                providerId, situation: .temporarilyUnavailable, detail: "The \(providerId) API host has been failing; not calling it for now.")
            refusal.logDetail = "API host \(origin) refused by its breaker"
            // 503 with the seconds until the host's breaker lets a probe through.
            refusal.retryAfter = retryAfter
            return refusal
        }
        let origin = apiOrigins[providerId] ?? HostBreakers.origin(of: base)
        let breakerCaller = caller.breakerIdentity(uid: uid)
        let hosts = self.hosts
        let githubLimits = (provider as? GitHubProvider)?.rateLimits
        // The resource GitHub counts the call against; only GitHub's calls need it.
        let rateLimitResource = githubLimits.map { _ in GitHubRateLimits.resource(of: request.path) }
        let clock = configuration.clock
        let response: OutboundStreamingResponse
        let tokens: ProviderTokens
        do {
            (response, tokens) = try await profiles.withFreshTokens(link, provider, for: template.description, refreshesThroughBreaker: true) {
                tokens in
                // A token GitHub has limited waits out the limit here, without a call.
                if let limits = githubLimits, let resource = rateLimitResource,
                    let wait = await limits.wait(for: tokens.accessToken, resource: resource, now: clock.now())
                {
                    throw GatehouseError.upstreamRateLimited(providerId, retryAfter: wait)
                }
                var authorized = prepared
                authorized.headers.set("Authorization", "Bearer \(tokens.accessToken)")
                // Only the API host's own answers reach its breaker: a refresh that failed at the
                // token endpoint (which the provider's breaker counts), or that breaker open, is
                // not this host failing. A failure of the caller's body is not either: it reaches
                // the breaker as neither (not a GatehouseError), and a body that stalls is the
                // caller's `408`; an answer over the cap is what the caller asked for. The breaker
                // opens only on failures of at least two callers, so one caller cannot open it
                // for everyone.
                let response = try await hosts.run(
                    origin: origin, caller: breakerCaller, refused: refused, failed: { [502, 503, 504].contains($0.head.status) }
                ) {
                    try await http.stream(authorized, endpoint: .api)
                }
                // The stored token was refused: refreshed once and retried by withFreshTokens
                // (a second refusal, or a grant without refresh token, needs a new sign-in).
                if response.head.status == 401 { throw GatehouseError.providerReauthRequired(providerId) }
                return (response, tokens)
            }
        } catch let error as OutboundBodyError {
            throw error.underlying
        } catch let error as OutboundError where error.kind == .bodyNotReplayable {
            // The provider refused the stored token after taking a body too large to keep; the
            // token is refreshed now, and the provider did nothing with the call: safe to send again.
            throw GatehouseError.upstreamUnavailable(
                providerId, situation: .temporarilyUnavailable,
                detail:
                    "\(providerId) refused the stored access token, which is now refreshed; the request body was streamed and is too large to send twice. Send the call again."
            )
        }
        return try await answer(
            response, tokens: tokens, template: template, limits: limits, providerId: providerId, base: base, http: http,
            githubLimits: githubLimits, gatewayBase: gatewayBase, caller: caller, uid: uid, writeHold: writeHold)
    }

    /// Refuses a query string a URL cannot carry. (Out of line, as is `outbound`: `send`'s
    /// frame stays allocated while the upstream call is in flight.)
    @inline(never)
    private static func checkQuery(_ query: String?) throws {
        guard let query else { return }
        guard query.utf8.count <= 4096, !query.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F || $0 == "#" }) else {
            throw GatehouseError.invalidArgument("The query string is too long or has characters a URL cannot carry.")
        }
    }

    /// The call to the provider at `base`, without its `Authorization`: the caller's method,
    /// path, query, forwarded headers and body, within the policy's limits; `uid`'s call.
    @inline(never)
    private static func outbound(_ request: ProviderAPIRequest, base: String, limits: APIPolicy.Provider, uid: String) -> OutboundRequest {
        // One string sized at once: joined with `+`, the query's `?` made a string of its own and
        // each piece grew the URL again. (`encoded` builds a string at each read.)
        let path = request.path.encoded
        var url = ""
        url.reserveCapacity(base.utf8.count + path.utf8.count + 1 + (request.query?.utf8.count ?? 0))
        url += base
        url += path
        if let query = request.query {
            url += "?"
            url += query
        }
        var outbound = OutboundRequest(method: request.method.rawValue, url: url)
        // The user's share of the calls out (GATEHOUSE_UPSTREAM_CALLS_PER_USER), whoever asks
        // for it: one user's slow calls cannot take every slot. `.normal` priority (the default):
        // however many users' calls stall, the reserved slots stay for sign-ins.
        outbound.owner = uid
        for (name, value) in request.headers where ProviderAPIRequest.forwardedHeaders.contains(OutboundHeaders.lowercasedName(name)) {
            outbound.headers.add(name, value)
        }
        if request.method.hasBody {
            if let upload = request.body { outbound.upload = upload } else { outbound.body = [] }
        }
        outbound.maxResponseBytes = limits.maxResponseBytes
        if let timeout = limits.timeout { outbound.timeout = timeout }
        return outbound
    }

    /// The caller's answer from the provider's: rate limits and scope refusals as problems,
    /// the headers that pass, paging links moved to the gateway, the body whole or streaming.
    ///
    /// A function of its own, never inlined: an async function's frame is allocated whole for
    /// each call and stays allocated while the upstream call is in flight, so these locals
    /// would cost every call in flight, and a connection's task keeps its deepest frames while
    /// the connection is open.
    @inline(never)
    private func answer(
        _ response: OutboundStreamingResponse, tokens: ProviderTokens, template: APITemplate, limits: APIPolicy.Provider,
        providerId: String, base: String, http: UpstreamHTTP, githubLimits: GitHubRateLimits?, gatewayBase: () -> String, caller: Caller,
        uid: String, writeHold: ByteBudget.Hold?
    ) async throws -> ProviderAPIAnswer {
        let clock = configuration.clock
        // GitHub's primary and secondary rate limits: `429 upstream-rate-limited` with the time
        // to wait, and the token held back until then (a limit is neither an outage nor a dead
        // grant: the breaker saw an answer).
        if let limits = githubLimits,
            let limit = GitHubRateLimits.limit(status: response.head.status, headers: response.head.headers, now: clock.now())
        {
            await limits.hold(token: tokens.accessToken, limit, now: clock.now())
            throw GatehouseError.upstreamRateLimited(providerId, retryAfter: limit.retryAfter)
        }
        // A refusal may be for lack of scope; reading it to find out consumes the body, which
        // then goes to the caller whole.
        var readBody: [UInt8]?
        // Taken only for a body read whole: every other answer streams, or is small.
        var hold: ByteBudget.Hold?
        if response.head.status == 403 {
            let held = writeHold ?? newHold(caller: caller, uid: uid, method: template.method)
            hold = held
            let refusal = try await missingScopes(response, template: template, tokens: tokens, http: http, providerId: providerId, hold: held)
            if let missing = refusal.missing { throw GatehouseError.insufficientProviderScope(providerId, missing: missing) }
            if let limits = githubLimits,
                let limit = GitHubRateLimits.limit(status: 403, headers: response.head.headers, body: refusal.body, now: clock.now())
            {
                await limits.hold(token: tokens.accessToken, limit, now: clock.now())
                throw GatehouseError.upstreamRateLimited(providerId, retryAfter: limit.retryAfter)
            }
            readBody = refusal.body
        }
        // Paging links are followed with GET: only those to a path and query the policy allows
        // stay. Made only for an answer that may carry such links (a `Link` field, Graph's
        // JSON): its closure and the gateway's base URL were allocated on every call.
        func paging() -> PagingLinks {
            PagingLinks(providerBase: base, gatewayBase: gatewayBase()) { limits.template(for: .get, $0, query: $1) != nil }
        }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(response.head.headers.fields.count)
        for (name, value) in response.head.headers.fields {
            let lower = OutboundHeaders.lowercasedName(name)
            guard ProviderAPIAnswer.passes(lowercasedName: lower) else { continue }
            if lower == "link" {
                if let links = paging().rewriteLinkHeader(value) { headers.append((lower, links)) }
            } else {
                headers.append((lower, value))
            }
        }
        // Graph pages with `@odata.nextLink` in the JSON body: such answers are read whole
        // (within the cap) so the link can be moved; everything else streams.
        if let readBody {
            return ProviderAPIAnswer(status: response.head.status, headers: headers, body: .whole(readBody), template: template, hold: hold)
        }
        if providerId == "microsoft.com", response.head.headers["content-type"]?.lowercased().contains("json") == true {
            let held = hold ?? writeHold ?? newHold(caller: caller, uid: uid, method: template.method)
            let body = try await collect(response, http: http, providerId: providerId, hold: held, cap: limits.maxResponseBytes)
            return ProviderAPIAnswer(
                status: response.head.status, headers: headers, body: .whole(paging().rewriteODataLinks(body) ?? body), template: template,
                hold: held)
        }
        // A small answer goes out whole, with its length, in one write with its head; the
        // rest stream as they arrive (see `wholeAnswerBytes`).
        if let declared = response.head.headers["content-length"].flatMap({ Int($0) }), declared <= Self.wholeAnswerBytes {
            // Read outside the answer budget, so no more than the declared length.
            let body = try await http.collect(response, declaredLength: declared)
            return ProviderAPIAnswer(status: response.head.status, headers: headers, body: .whole(body), template: template)
        }
        if let whole = try http.completedBody(response) {
            return ProviderAPIAnswer(status: response.head.status, headers: headers, body: .whole(whole), template: template)
        }
        return ProviderAPIAnswer(status: response.head.status, headers: headers, body: .streaming(response.body), template: template)
    }

    /// Answers of up to this declared length are read whole before the caller gets its head,
    /// and so is any answer that has arrived whole by the time its head is handled (without
    /// waiting: a trickling or endless answer streams as it comes). Streamed, even a 2 KB
    /// answer left as a head, a chunk and an end: three writes, each a hand-off from the
    /// request's task to the connection's event loop, and chunked framing. Whole, it is one
    /// write with a `Content-Length` (measured: 114 µs of CPU per 2 KB call instead of 140).
    static let wholeAnswerBytes = 64 << 10

    /// The scopes a provider's `403` says the grant lacks (`nil` when the refusal is about
    /// something else): GitHub's `X-Accepted-OAuth-Scopes` against `X-OAuth-Scopes`, an RFC 6750
    /// `insufficient_scope` challenge, Graph's `Authorization_RequestDenied` / `ErrorAccessDenied`
    /// (then the template's scopes the grant does not list); and the body when it was read.
    private func missingScopes(
        _ response: OutboundStreamingResponse, template: APITemplate, tokens: ProviderTokens, http: UpstreamHTTP, providerId: String,
        hold: ByteBudget.Hold
    ) async throws -> (missing: [String]?, body: [UInt8]?) {
        let headers = response.head.headers
        if let accepted = headers["x-accepted-oauth-scopes"].map(Self.scopeList), !accepted.isEmpty {
            let granted = Set(headers["x-oauth-scopes"].map(Self.scopeList) ?? tokens.scopes)
            return (accepted.contains(where: granted.contains) ? nil : accepted, nil)
        }
        if let challenge = headers["www-authenticate"], challenge.contains("insufficient_scope") {
            return (Self.challengeScope(challenge) ?? missing(template.scopes, granted: tokens.scopes), nil)
        }
        guard (headers["content-type"] ?? "").contains("json"), (headers["content-length"].flatMap(Int.init) ?? 0) <= 64 << 10 else {
            return (nil, nil)
        }
        // A Graph refusal is small; read it (within the answer cap and the buffer budget) to learn why.
        let body = try await collect(response, http: http, providerId: providerId, hold: hold, cap: 64 << 10)
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let code = (object["error"] as? [String: Any])?["code"] as? String,
            ["Authorization_RequestDenied", "ErrorAccessDenied", "AccessDenied"].contains(code)
        else { return (nil, body) }
        return (missing(template.scopes, granted: tokens.scopes), body)
    }

    /// A hold on the answer budget for `caller`'s call: a `GET`'s answer is refused when it does
    /// not fit (the caller sends it again), any other's is read whatever the budget holds, since
    /// the provider may have acted on it.
    private func newHold(caller: Caller, uid: String, method: APIMethod) -> ByteBudget.Hold {
        ByteBudget.Hold(on: answerBytes, owner: caller.breakerIdentity(uid: uid), grouped: caller.isUser, overdrawing: method != .get)
    }

    /// The answer budget's hold for a call other than a `GET` to a provider whose answers are
    /// read whole, with `writeReservation` of it set aside before anything is sent: once sent,
    /// the answer is read whatever the budget holds (only past what was set aside does it
    /// overdraw). `503` (nothing sent) when the caller's share has no room for it; `nil` for any
    /// other call.
    @inline(never)
    private func admitWrite(_ method: APIMethod, providerId: String, caller: Caller, uid: String, limits: APIPolicy.Provider) throws
        -> ByteBudget.Hold?
    {
        guard method != .get, providerId == "microsoft.com" else { return nil }
        let hold = newHold(caller: caller, uid: uid, method: method)
        guard hold.reserve(min(limits.maxResponseBytes, Self.writeReservation)) else { throw Self.budgetSpent(providerId) }
        return hold
    }

    /// What a write to Graph sets aside for its answer before it is sent: more than the entity a
    /// write answers, so that only a larger answer (a `$batch`'s) overdraws the budget.
    static let writeReservation = 1 << 20

    /// `503 upstream-unavailable` with `Retry-After: 1`: the answer budget has no room.
    private static func budgetSpent(_ providerId: String) -> GatehouseError {
        var refusal = GatehouseError.upstreamUnavailable(
            providerId, situation: .temporarilyUnavailable,
            detail: "The gateway holds as many \(providerId) answers in memory as it may (GATEHOUSE_API_BUFFER_BYTES); try again shortly.")
        refusal.retryAfter = 1
        return refusal
    }

    /// The answer's body whole, within the policy's cap and the process's answer budget
    /// (`answerBytes`): when the answers held across calls, or the caller's own share, leave no
    /// room for a `GET`'s, the transfer is dropped and the caller gets `503 upstream-unavailable`
    /// with `Retry-After: 1`.
    private func collect(
        _ response: OutboundStreamingResponse, http: UpstreamHTTP, providerId: String, hold: ByteBudget.Hold, cap: Int
    ) async throws -> [UInt8] {
        guard let body = try await http.collect(response, holding: hold, cap: cap) else { throw Self.budgetSpent(providerId) }
        return body
    }

    private func missing(_ needed: [String], granted: [String]) -> [String] {
        let held = Set(granted.map { $0.lowercased() })
        return needed.filter { !held.contains($0.lowercased()) }
    }

    /// `repo, user:email` or `Mail.Read Calendars.Read` as a list.
    static func scopeList(_ text: String) -> [String] {
        text.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init).filter { !$0.isEmpty }
    }

    /// The `scope="…"` parameter of a bearer challenge.
    static func challengeScope(_ challenge: String) -> [String]? {
        guard let range = challenge.range(of: "scope=\"") else { return nil }
        let rest = challenge[range.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return scopeList(String(rest[..<end]))
    }

    /// A fresh access token of the user's grant for a service that must call the provider
    /// itself (refreshed first when it has expired or expires within 30 s).
    public func accessToken(uid: String, providerId: String, keyId: String) async throws -> HandedAccessToken {
        _ = try await profiles.enabledAccount(uid)
        let link = try await profiles.link(uid: uid, providerId: providerId)
        let provider = try providers.provider(providerId)
        let tokens = try await profiles.withFreshTokens(link, provider, for: "token", refreshesThroughBreaker: true) { $0 }
        audit.record(.providerTokenIssued, by: .serviceKey(keyId), uid: uid, provider: providerId)
        metrics.providerTokenIssued(providerId: providerId)
        return HandedAccessToken(
            accessToken: tokens.accessToken, expiresAt: tokens.expiresAt.flatMap { Int(exactly: $0.rounded(.down)) }, scopes: tokens.scopes)
    }
}
