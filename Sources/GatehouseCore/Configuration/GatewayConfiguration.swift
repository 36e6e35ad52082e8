import CurlClient
import Foundation

/// Everything the core needs to know about its deployment.
public struct GatewayConfiguration: Sendable {
    /// The gateway's public base URL (`https://auth.example.com`), without trailing slash;
    /// callbacks and photo URLs are built from it.
    public var publicURL: String
    /// Where sign-ins may return to: each entry is an origin plus a path prefix
    /// (`https://app.example.com/` or `https://app.example.com/account`).
    public var returnToAllowList: [String]
    /// Development mode: plain `http://` on loopback, cookies without `Secure`/`__Host-`.
    /// Never on in production; `gatehouse demo` turns it on.
    public var developmentMode: Bool
    /// How long a started sign-in may take (design §2: 10 minutes).
    public var transactionLifetime: TimeInterval
    /// How long a sign-in result may be fetched (design §2: 60 seconds).
    public var resultLifetime: TimeInterval
    /// How long a session cookie stays valid.
    public var sessionLifetime: TimeInterval
    /// The largest photo the gateway fetches from a provider.
    public var maxPhotoBytes: Int
    /// How long live provider profiles and photos are reused (0 turns the cache off).
    public var profileCacheLifetime: TimeInterval = 60
    /// How long accounts, links and sessions read from the store may be answered from memory
    /// (0: never). Writes drop them at once, on every instance of a PostgreSQL deployment
    /// through its change feed; this bounds only what a lost notification could leave.
    public var accountCacheLifetime: TimeInterval = 60
    /// How many accounts (each with its links and sessions) are held in memory at most.
    public var accountCacheCapacity = 10_000
    /// The photo cache's budget in bytes.
    public var photoCacheBytes: Int = 32 << 20
    /// Joins the pieces of a photo's transfer into what the cache keeps and every answer
    /// sends: the HTTP layer passes a form it sends without copying (`PhotoBytes`).
    public var photoBytes: @Sendable ([[UInt8]]) -> any PhotoBytes = [UInt8].joining
    /// Seconds a photo source that failed (`photo-unavailable`) is remembered as failed for
    /// that user and size, so polling cannot hammer it (0: not remembered).
    public var photoFailureLifetime: TimeInterval = 60
    /// The total time one fetch from a photo host (GitHub avatars, OpenID pictures) may take;
    /// `nil`: the provider's upstream timeout.
    public var photoTimeout: Duration?
    /// How long past its lifetime a cached profile or photo may still be served, marked
    /// stale, when its provider is failing (RFC 5861's stale-if-error; 0 never serves stale).
    public var staleIfError: TimeInterval = 3600
    /// The total time one call to a provider may take, by provider id; others get
    /// `defaultUpstreamTimeout`.
    public var upstreamTimeouts: [String: Duration] = [:]
    /// The timeout of providers without their own.
    public var defaultUpstreamTimeout: Duration = .seconds(10)
    /// When a provider's circuit breaker opens.
    public var circuitBreaker = CircuitBreakerSettings()
    /// Which provider's photo `/photo` serves when the caller names none: the first of these
    /// that is linked and has a photo, then any linked provider with one (in link order).
    public var photoProviderOrder: [String] = []
    /// Firebase's "one account per email address": a first sign-in whose verified email
    /// belongs to an account of another provider answers `account-exists-with-different-credential`
    /// instead of creating a second account.
    public var oneAccountPerEmail = true
    /// Whether `GET /v1/auth/methods?email=` answers (off: email-enumeration protection).
    public var signInMethodsLookup = false
    /// Whether the access log writes `/healthz` and `/readyz` at info like other requests
    /// (`GATEHOUSE_LOG_PROBES`); by default at debug.
    public var logProbes = false
    /// How recent a sign-in must be for unlink, account deletion and service-key creation.
    public var recentLoginWindow: TimeInterval = 300
    /// How long a pending credential can be claimed.
    public var pendingCredentialLifetime: TimeInterval = 600
    /// How long gateway ID tokens live (design §2: one hour).
    public var idTokenLifetime: TimeInterval = 3600
    /// How often each instance rereads the signing keys (to start signing with a key that
    /// `gatehouse keys rotate-signing` added).
    public var signingKeyReloadInterval: TimeInterval = 30
    /// The `aud` of gateway ID tokens; defaults to the public URL.
    public var tokenAudience: String?
    /// Browser origins allowed to call the API with credentials (CORS) and to make
    /// cookie-authenticated changes; defaults to the origins of the `return_to` allow-list.
    public var allowedOrigins: [String]?
    /// Addresses or CIDR ranges (`10.0.0.0/8`) of the reverse proxies whose `X-Forwarded-For`
    /// names the client: the right-most address in it that is not a trusted proxy (design §4:
    /// trusted only from configured proxies; see `TrustedProxies`).
    public var trustedProxies: [String] = []
    /// Display names of native and desktop apps by `return_to` allow-list entry
    /// (`com.example.app:/oauth2redirect` → `Example`), shown on the consent page that asks the
    /// user whether the app may have the sign-in; an app without one is named by its address.
    public var appNames: [String: String] = [:]

    /// The origin of `publicURL` (`https://auth.example.com`), as browsers send `Origin` for the
    /// gateway's own pages.
    public var publicOrigin: String? { URLAllowList.parse(publicURL)?.origin }
    /// Requests per minute one client may make to each sign-in, token and link route.
    public var authRateLimitPerMinute = 60
    /// Requests per minute one signed-in user may make to `/v1/me…` (per instance; 0: no limit).
    public var userRateLimitPerMinute = 600
    /// Requests per minute one service key may make to `/v1/users…` (per instance; 0: no limit).
    public var serviceRateLimitPerMinute = 6000
    /// Session cookies and service keys one client (an IPv6 client's /64) may present per
    /// minute that name nothing live; past them its cookies and keys are `429` before any
    /// look-up (per instance; 0: no limit). Each such credential costs a read of the store.
    public var credentialFailureLimitPerMinute = 300
    /// Whether every browser flow must bind its result to the client that started it
    /// (`result_challenge` at start, `result_verifier` at `POST /v1/auth/result`). Turning it
    /// off lets a stolen result id be redeemed by anyone within its lifetime.
    public var requireResultBinding = true
    /// Seconds during which presenting the refresh token just spent returns the same
    /// successor (a retry after a lost answer), and redeeming a result again with the same
    /// verifier returns the same tokens; `0`: strict, every second use revokes. Only the
    /// immediately preceding token ever gets the window. The trade-off: a thief replaying a
    /// token inside the window gets the successor instead of revoking the family.
    public var refreshRetryWindow: TimeInterval = 10
    /// How many refreshes one session may make; the one after ends the session and its user
    /// signs in again. Every spent refresh token is kept while its session lives (so that a
    /// reuse of any of them revokes the family): this bounds what a client refreshing as
    /// fast as its rate limit allows can make one session keep. 10,080 is a refresh every
    /// minute for the whole of a seven-day session. From 1 to `maximumSessionRefreshLimit`.
    public var sessionRefreshLimit = 10_080
    /// The largest `sessionRefreshLimit`: each refresh counts the session's spent tokens up to
    /// the limit, so it bounds that count's cost too.
    public static let maximumSessionRefreshLimit = 1_000_000
    /// The configured GitHub provider, if any.
    public var github: GitHubConfiguration?
    /// The configured Microsoft provider, if any.
    public var microsoft: MicrosoftConfiguration?
    /// The configured OpenID Connect providers (`oidc.<name>` and the Yahoo preset).
    public var oidcProviders: [OIDCProviderConfiguration]

    /// The ids of the configured providers (`github.com`, `microsoft.com`, then the OpenID ones).
    public var providerIds: [String] {
        (github == nil ? [] : ["github.com"]) + (microsoft == nil ? [] : ["microsoft.com"]) + oidcProviders.map(\.providerId)
    }
    /// Whether photo URLs may lead to loopback, private, link-local or unique-local addresses
    /// (`nil`: only in development mode). Checked on the address libcurl connects to.
    public var allowPrivatePhotoAddresses: Bool?
    /// The address policy of photo fetches.
    public var photoAddresses: AddressPolicy { (allowPrivatePhotoAddresses ?? developmentMode) ? .any : .publicOnly }
    /// How long a service key read from the store is trusted before it is read again (seconds;
    /// 0: every request reads the store). On PostgreSQL a revocation reaches every instance
    /// through the change feed at once; this bounds it when the feed is down, and on SQLite,
    /// where `gatehouse keys revoke` (another process) has no feed.
    public var serviceKeyCacheLifetime: TimeInterval = 5
    /// How long a provider token set, once decrypted, is kept in memory (seconds; 0: never).
    /// Keyed by its sealed form, so a refreshed or re-encrypted grant is never served stale.
    public var decryptedTokenLifetime: TimeInterval = 30
    /// Which provider API calls the passthrough routes may make (closed unless configured).
    public var api: APIPolicy = .closed
    /// The bytes of provider API answers read whole (Graph's JSON) that all calls together may
    /// hold in memory (`GATEHOUSE_API_BUFFER_BYTES`); at least four times the largest
    /// `maxResponseBytes` of a provider whose answers are read whole.
    public var apiBufferBytes = 64 << 20

    /// The memory the gateway may keep beyond its connections and calls: the photo cache, the
    /// budgets of the live-profile and account caches that are on, and twice the API answer
    /// budget when Graph's answers may be passed through (the connection and call limits under
    /// a memory limit are sized in what is left).
    public var memoryKept: Int {
        var recordCaches = 0
        if profileCacheLifetime > 0 { recordCaches += ProfileService.profileCacheBytes }
        if accountCacheLifetime > 0, accountCacheCapacity > 0 { recordCaches += AccountReadCache.defaultByteBudget }
        return Self.memoryKept(
            photoCacheBytes: photoCacheBytes, apiBufferBytes: api.providers["microsoft.com"] != nil ? apiBufferBytes : 0,
            recordCacheBytes: recordCaches)
    }

    /// The budgets of the live-profile cache and the account cache together (32 MiB each).
    public static let recordCacheBytes = ProfileService.profileCacheBytes + AccountReadCache.defaultByteBudget

    /// The photo cache, the record caches' `recordCacheBytes` and twice the API answer budget
    /// (an answer is copied once on its way out, and its links' rewrite is a copy too), without
    /// overflowing.
    public static func memoryKept(photoCacheBytes: Int, apiBufferBytes: Int, recordCacheBytes: Int = recordCacheBytes) -> Int {
        let (twice, over) = apiBufferBytes.multipliedReportingOverflow(by: 2)
        let (sum, overAgain) = photoCacheBytes.addingReportingOverflow(twice)
        let (total, overOnceMore) = sum.addingReportingOverflow(recordCacheBytes)
        return over || overAgain || overOnceMore ? Int.max : total
    }
    /// The app's blocking hooks (`GATEHOUSE_HOOK_*`); `nil`: none.
    public var hooks: HookConfiguration?
    /// The webhook endpoints (`GATEHOUSE_WEBHOOK_*`); `nil`: none.
    public var webhooks: WebhookConfiguration?
    /// How long stored audit events (the activity listing) are kept (default 90 days).
    public var auditRetention: TimeInterval = 90 * 86400
    /// The operators' console at `/admin/`; `nil` (the default) serves none.
    public var console: ConsoleConfiguration?
    /// The custom claim that makes an account a console operator when `true`
    /// (`GATEHOUSE_ADMIN_CLAIM`), protected whether or not the console is on: only an operator
    /// or an `admin` key may change its value, so no account collects it while the console is
    /// off. `nil`: the console's own (`console?.operatorClaim`), if any; naming another claim
    /// than the console's fails `validate()`.
    public var operatorClaim: String?

    /// The operator claim in force: `operatorClaim`, else the console's; `nil` when neither
    /// names one (an empty name names none).
    public var protectedOperatorClaim: String? {
        [operatorClaim, console?.operatorClaim].lazy.compactMap { $0 }.first { !$0.isEmpty }
    }
    /// The API reference page served at `/docs` (HTML that `scripts/api-docs` renders from the
    /// OpenAPI document); `nil` (the default) serves none.
    public var apiReferencePage: String?
    /// Yahoo's API base for passthrough calls (its Fantasy Sports API), unless the policy names one.
    public static let yahooAPIBaseURL = "https://fantasysports.yahooapis.com"
    /// Where the core reads the time (the machine's clock; tests move an `OffsetClock`).
    public var clock: any GatehouseClock = SystemClock()

    /// Creates a configuration with the documented defaults.
    public init(
        publicURL: String,
        returnToAllowList: [String],
        developmentMode: Bool = false,
        transactionLifetime: TimeInterval = 600,
        resultLifetime: TimeInterval = 60,
        sessionLifetime: TimeInterval = 7 * 24 * 3600,
        maxPhotoBytes: Int = 5 << 20,
        github: GitHubConfiguration? = nil,
        microsoft: MicrosoftConfiguration? = nil,
        oidcProviders: [OIDCProviderConfiguration] = []
    ) {
        self.publicURL = publicURL.hasSuffix("/") ? String(publicURL.dropLast()) : publicURL
        self.returnToAllowList = returnToAllowList
        self.developmentMode = developmentMode
        self.transactionLifetime = transactionLifetime
        self.resultLifetime = resultLifetime
        self.sessionLifetime = sessionLifetime
        self.maxPhotoBytes = maxPhotoBytes
        self.github = github
        self.microsoft = microsoft
        self.oidcProviders = oidcProviders
    }

    /// The `aud` gateway ID tokens carry.
    public var idTokenAudience: String { tokenAudience ?? publicURL }

    /// The origins allowed for CORS and cookie-authenticated changes.
    public var browserOrigins: [String] {
        var origins = allowedOrigins ?? returnToAllowList.compactMap(ReturnToPolicy.webOrigin(ofEntry:))
        // The gateway's own pages (the demo) call the API from its own origin.
        if let own = ReturnToPolicy.parse(publicURL)?.origin, !origins.contains(own) { origins.append(own) }
        return origins
    }

    /// The timeout of one provider's calls.
    public func upstreamTimeout(for providerId: String) -> Duration {
        upstreamTimeouts[providerId] ?? defaultUpstreamTimeout
    }

    /// The providers whose API policy allows a call with a request body (`POST`, `PUT`,
    /// `PATCH`), by id, each with the total time one of its passthrough calls may take: the
    /// policy's `timeoutSeconds`, else the provider's upstream timeout. An upload streams to
    /// the provider as the provider reads it, so its client waits on the provider that long.
    public var uploadTimeouts: [(providerId: String, timeout: Duration)] {
        api.providers.sorted { $0.key < $1.key }.compactMap { providerId, provider in
            guard provider.allow.contains(where: { $0.method.hasBody }) else { return nil }
            return (providerId, provider.timeout ?? upstreamTimeout(for: providerId))
        }
    }

    /// The API base of `providerId`'s passthrough calls: the policy's, else the provider's own
    /// (GitHub's API, Graph, Yahoo's Fantasy Sports API); `nil` when there is none (a generic
    /// OpenID provider whose policy names no base).
    public func apiBaseURL(for providerId: String) -> String? {
        if let base = api.providers[providerId]?.baseURL { return base.hasSuffix("/") ? String(base.dropLast()) : base }
        switch providerId {
        case "github.com": return github?.apiBaseURL
        case "microsoft.com": return microsoft?.graphBaseURL
        case "yahoo.com": return Self.yahooAPIBaseURL
        default: return nil
        }
    }

    /// Checks the API policy: only configured providers, each with an API base that is an
    /// `https` URL (loopback `http` in development mode) without query or fragment.
    private func validateAPIPolicy(configured: Set<String>) throws {
        guard apiBufferBytes <= 1 << 40 else { throw GatehouseError.invalidArgument("GATEHOUSE_API_BUFFER_BYTES may be at most 1 TiB") }
        // Graph's JSON answers are read whole: one as large as the policy allows must fit in a
        // caller's share, a quarter of the budget.
        if let graph = api.providers["microsoft.com"], graph.maxResponseBytes > apiBufferBytes / 4 {
            throw GatehouseError.invalidArgument(
                "GATEHOUSE_API_BUFFER_BYTES (\(apiBufferBytes)) must be at least four times microsoft.com's maxResponseBytes (\(graph.maxResponseBytes)): its JSON answers are read whole, one caller's within a quarter of the budget"
            )
        }
        for providerId in api.providers.keys.sorted() {
            guard configured.contains(providerId) else {
                throw GatehouseError.invalidArgument("the API policy names \(providerId), which is not a configured provider")
            }
            guard let base = apiBaseURL(for: providerId) else {
                throw GatehouseError.invalidArgument("the API policy of \(providerId) needs a baseURL (the provider's API base)")
            }
            try EndpointPolicy.check(base, developmentMode: developmentMode)
            guard let components = URLComponents(string: base), components.query == nil, components.fragment == nil, components.user == nil
            else {
                throw GatehouseError.invalidArgument("the API base of \(providerId) may not carry a query, a fragment or credentials")
            }
        }
    }

    /// Checks the endpoints: `https` only, except loopback `http` in development mode (design §1).
    public func validate() throws {
        if let problem = hooks?.problem() { throw GatehouseError.invalidArgument(problem) }
        // The claim the console admits by must be the claim that is protected.
        if let claim = operatorClaim, !claim.isEmpty, let consoleClaim = console?.operatorClaim, !consoleClaim.isEmpty, claim != consoleClaim {
            throw GatehouseError.invalidArgument(
                "the operator claim (\(claim.debugDescription)) and the console's (\(consoleClaim.debugDescription)) differ: name one claim")
        }
        // A reserved name is refused in every account's claims, so no account could carry it.
        if let claim = protectedOperatorClaim, CustomClaims.isReserved(claim) {
            throw GatehouseError.invalidArgument(
                "GATEHOUSE_ADMIN_CLAIM: \(claim.debugDescription) is a reserved claim, which no account can carry: name a claim of its own")
        }
        if let problem = webhooks?.problem() { throw GatehouseError.invalidArgument(problem) }
        guard (1...Self.maximumSessionRefreshLimit).contains(sessionRefreshLimit) else {
            throw GatehouseError.invalidArgument(
                "GATEHOUSE_SESSION_REFRESH_LIMIT is a whole number from 1 to \(Self.maximumSessionRefreshLimit)")
        }
        // An operator named by address is whichever account a provider vouches for it: only
        // the rule of one account per verified address makes that one account.
        if let console, !oneAccountPerEmail, let named = console.operators.first(where: { $0.contains("@") }) {
            throw GatehouseError.invalidArgument(
                "GATEHOUSE_ADMINS names an operator by email (\(named)), which needs GATEHOUSE_ONE_ACCOUNT_PER_EMAIL=true: without it every account a provider verifies that address for would be an operator; name operators by uid"
            )
        }
        // The console signs operators in with `return_to=<public URL>/admin/`: an allow-list that
        // does not admit it would refuse each of the console's sign-in links.
        let consoleReturn = publicURL + "/admin/"
        if console != nil, ReturnToPolicy(allowList: returnToAllowList).kind(of: consoleReturn) == nil {
            throw GatehouseError.invalidArgument(
                "the console signs operators in with return_to \(consoleReturn), which GATEHOUSE_RETURN_TO_ALLOWLIST must admit: add \(consoleReturn)"
            )
        }
        // Browsers send `Origin` as `scheme://host[:port]`, lower case, the scheme's default port
        // left out: an entry written any other way would match no request, silently.
        for entry in allowedOrigins ?? [] {
            guard let origin = URLAllowList.webOrigin(of: entry), origin == entry else {
                let written = URLAllowList.webOrigin(of: entry).map { "; write \($0)" } ?? ""
                throw GatehouseError.invalidArgument(
                    "GATEHOUSE_ALLOWED_ORIGINS: \(entry.truncated(toBytes: 200).debugDescription) is not an origin as browsers send it (scheme://host[:port], no path, no default port)\(written)"
                )
            }
            // A page served over plain http can be rewritten on the network, and an allowed
            // origin's script acts with the user's cookie.
            guard developmentMode || entry.hasPrefix("https://") else {
                throw GatehouseError.invalidArgument(
                    "GATEHOUSE_ALLOWED_ORIGINS: \(entry.debugDescription) is plain http, allowed only in development mode (GATEHOUSE_DEVELOPMENT=true)"
                )
            }
        }
        do {
            _ = try TrustedProxies(parsing: trustedProxies)
        } catch {
            throw GatehouseError.invalidArgument(
                "GATEHOUSE_TRUSTED_PROXIES: \(error.entry.debugDescription) is neither an IP address nor a CIDR range such as 10.0.0.0/8")
        }
        for url in [publicURL] + (github.map { [$0.authorizeURL, $0.tokenURL, $0.apiBaseURL] } ?? []) {
            try EndpointPolicy.check(url, developmentMode: developmentMode)
        }
        // Development mode drops the cookies' `Secure` and `__Host-`, admits plain-http pages
        // and photos at private addresses: conveniences for a gateway its own machine alone
        // reaches, which a deployment reached over https must never have.
        if developmentMode, !EndpointPolicy.isLoopback(publicURL) {
            throw GatehouseError.invalidArgument(
                "GATEHOUSE_DEVELOPMENT=true is for a gateway on this machine: GATEHOUSE_PUBLIC_URL must then name a loopback address (127.0.0.1, ::1 or localhost), not \(publicURL.debugDescription)"
            )
        }
        var seen: Set<String> = github == nil ? [] : ["github.com"]
        if let microsoft {
            seen.insert("microsoft.com")
            try EndpointPolicy.check(microsoft.loginBaseURL, developmentMode: developmentMode)
            try EndpointPolicy.check(microsoft.graphBaseURL, developmentMode: developmentMode)
            guard MicrosoftTenants.isValid(microsoft.tenant) else {
                throw GatehouseError.invalidArgument("the Microsoft tenant must be common, organizations, consumers, a GUID or a domain")
            }
            // A token's `tid` is a GUID: any other entry would match nothing, and an allow-list
            // of such entries alone would restrict nothing.
            if let entry = microsoft.allowedTenants.sorted().first(where: { !MicrosoftTenants.isGUID($0) }) {
                throw GatehouseError.invalidArgument(
                    "the Microsoft allowed tenants must be tenant GUIDs, not \(entry.truncated(toBytes: 80).debugDescription)")
            }
        }
        for provider in oidcProviders {
            guard provider.providerId == "yahoo.com" || OIDCProviderConfiguration.isGenericProviderId(provider.providerId) else {
                throw GatehouseError.invalidArgument("OIDC provider ids are yahoo.com or oidc.<name>, not \(provider.providerId.debugDescription)")
            }
            guard seen.insert(provider.providerId).inserted else {
                throw GatehouseError.invalidArgument("provider \(provider.providerId) is configured twice")
            }
            try EndpointPolicy.check(provider.issuer, developmentMode: developmentMode)
            for url in provider.endpointOverrides.values { try EndpointPolicy.check(url, developmentMode: developmentMode) }
        }
        try validateAPIPolicy(configured: seen)
        for entry in returnToAllowList {
            guard let kind = ReturnToPolicy.entryKind(entry) else {
                throw GatehouseError.invalidArgument(
                    "return_to allow-list entry \(entry.debugDescription) is not an https URL, a loopback http URL or an app's reverse-domain scheme (com.example.app:/path)"
                )
            }
            // A page over plain http on the user's machine (a loopback port, localhost) is served
            // by whatever listens there: sign-ins returning to it as a web page would hand their
            // results to any program that took the port, without the consent page native
            // returns get (RFC 8252 §8.6). A development convenience only.
            if kind == .web, !developmentMode, URLAllowList.parse(entry)?.scheme == "http" {
                throw GatehouseError.invalidArgument(
                    "return_to allow-list entry \(entry.debugDescription) is a page over plain http on the user's machine, which any program listening on that port would receive sign-ins for: allowed only in development mode (GATEHOUSE_DEVELOPMENT); a desktop app's loopback entry is a loopback IP without a port (http://127.0.0.1/callback)"
                )
            }
        }
        for entry in appNames.keys.sorted() where !returnToAllowList.contains(entry) || ReturnToPolicy.entryKind(entry)?.isNative != true {
            throw GatehouseError.invalidArgument(
                "app name for \(entry.debugDescription): not a native or desktop entry of the return_to allow-list (GATEHOUSE_APP_NAMES)")
        }
    }
}

/// Which provider URLs the gateway may talk to.
public enum EndpointPolicy {
    /// Throws unless the URL is `https`, or `http` to loopback in development mode.
    public static func check(_ url: String, developmentMode: Bool) throws {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(), components.host != nil else {
            throw GatehouseError.invalidArgument("\(url.debugDescription) is not an absolute URL")
        }
        if scheme == "https" { return }
        guard isLoopbackHTTP(url), developmentMode else {
            throw GatehouseError.invalidArgument(
                "\(url.debugDescription): plain http is allowed only to loopback in development mode (GATEHOUSE_DEVELOPMENT=true)")
        }
    }

    /// Whether `url` is plain http to a loopback address (`127.0.0.1`, `::1`, `localhost`).
    public static func isLoopbackHTTP(_ url: String) -> Bool {
        URLComponents(string: url)?.scheme?.lowercased() == "http" && isLoopback(url)
    }

    /// Whether `url` (http or https) names a loopback address (`127.0.0.1`, `::1`, `localhost`).
    public static func isLoopback(_ url: String) -> Bool {
        guard let components = URLComponents(string: url), ["http", "https"].contains(components.scheme?.lowercased()),
            let host = components.host
        else { return false }
        // An IPv6 host keeps its brackets here (`[::1]`).
        return ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host.lowercased())
    }
}
