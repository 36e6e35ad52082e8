import GatehouseCore
import GatehouseServer

/// Every setting Gatehouse reads, in the order the Configuration article's table lists them:
/// the one source of truth for the loader (unknown keys, validation, secrets), `gatehouse
/// config show` and that table (`gatehouse config reference` prints it; a test compares).
enum SettingsCatalog {
    /// The settings.
    static let all: [Setting] = general + storage + providers + caches + behaviour + hooks + webhooks + console

    private static let general: [Setting] = [
        Setting(
            "GATEHOUSE_CONFIG", .path, inFile: false,
            "a YAML (`.yaml`, `.yml`) or JSON (`.json`) configuration file; also `--config` on every command"),
        Setting(
            "GATEHOUSE_SECRETS_DIR", .path, inFile: false,
            "a folder of mounted secrets, one file per setting named like its variable (`GATEHOUSE_ENCRYPTION_KEY`, …), content without the trailing line break — a Kubernetes Secret volume, Compose `secrets:`, systemd `LoadCredential=`"
        ),
        Setting(
            "GATEHOUSE_PUBLIC_URL", .url,
            "public base URL (required for `serve`); callbacks are `{url}/v1/auth/{provider}/callback`"),
        Setting("GATEHOUSE_HOST", .text, default: "127.0.0.1", "the public listener's address; also `--host`"),
        Setting("GATEHOUSE_PORT", .port, default: "8080", "the public listener's port; also `serve --port` (`demo` takes `--port` only)"),
        Setting(
            "GATEHOUSE_OPS_ADDRESS", .address, default: "127.0.0.1:9090",
            "the operations listener (`/metrics`, detailed `/readyz`, `/healthz`); `[::1]:9090` for IPv6; `demo`: a free loopback port"),
        Setting(
            "GATEHOUSE_DEVELOPMENT", .flag, default: "false",
            "`true` allows plain-http loopback provider URLs and pages, photos at private addresses, and drops `Secure`/`__Host-` from cookies; only with a `GATEHOUSE_PUBLIC_URL` on a loopback address (`demo`: `true`)"
        ),
        Setting(
            "GATEHOUSE_LOG_LEVEL", .choice(["trace", "debug", "info", "notice", "warning", "error", "critical"]), default: "info",
            "JSON log lines on standard error, never with secrets"),
        Setting("GATEHOUSE_LOG_PROBES", .flag, default: "false", "access-log lines of `/healthz` and `/readyz` at info (by default at debug)"),
        Setting("GATEHOUSE_CA_BUNDLE", .path, "PEM file of trusted CAs for outbound TLS (default: the system store)"),
        Setting(
            "GATEHOUSE_SHUTDOWN_DELAY", .seconds(0...300), default: "5",
            "seconds `/readyz` answers `503` after `SIGTERM` while the listener still serves (`demo`: `0`)"),
        Setting(
            "GATEHOUSE_SHUTDOWN_TIMEOUT", .seconds(1...3600), default: "20",
            "seconds requests in flight then get to finish before they are cancelled and the process exits"),
        Setting(
            "GATEHOUSE_IDLE_TIMEOUT", .seconds(1...3600), default: "\(GatewayService.defaultIdleTimeout.components.seconds)",
            "seconds either listener waits for a whole request head (of a new connection or after an answer), the next part of a body or a client to take more of its answer before it closes the connection; keep it above a load balancer's idle timeout"
        ),
        Setting(
            "GATEHOUSE_MAX_CONNECTIONS", .count(minimum: 1),
            "connections the public listener holds open at most; more wait in the listen backlog (default: what the open-file limit leaves after the process's own descriptors, the operations listener's 64, the database pool and a quarter for provider calls, and under a cgroup memory limit 48 KiB each in three quarters of what 64 MiB for the process and the photo cache leave)"
        ),
        Setting(
            "GATEHOUSE_PURGE_INTERVAL", .count(minimum: 1, maximum: SettingKind.longestWholeSeconds), default: "300",
            "seconds between purges of expired flows, results and sessions"),
        Setting(
            "GATEHOUSE_HEAP_TRIM_INTERVAL", .count(minimum: 0, maximum: SettingKind.longestWholeSeconds), default: "30",
            "seconds between returns of the memory the allocator holds free to the system (what a spike of connections leaves); `0`: never"),
    ]

    private static let storage: [Setting] = [
        Setting(
            "GATEHOUSE_DATA_DIR", .path, default: "gatehouse-data",
            "folder of the SQLite database, made private (0700); also `--data-dir`"),
        Setting(
            "GATEHOUSE_DATABASE_URL", .databaseURL,
            "PostgreSQL instead of SQLite; also `--database-url`, without a password (a command's arguments are readable by every local user)"),
        Setting("GATEHOUSE_DATABASE_POOL_SIZE", .count(minimum: 1), default: "20", "PostgreSQL connections at most"),
        Setting(
            "GATEHOUSE_DATABASE_TIMEOUT", .seconds(0.1...3600), default: "5",
            "how long one database operation may wait, a free connection included, before `503 storage-unavailable`; on PostgreSQL also each statement's `statement_timeout` (a migration's own statements excepted, whose waits for other transactions' locks end at half of it, 2 s at most; reads that scan whole tables get six times as long, two at a time on each instance)"
        ),
        Setting(
            "GATEHOUSE_ENCRYPTION_KEY", .key,
            "the key that wraps the data keys (required for `serve`; the demo and `keys` keep one in `encryption.key` of a data folder without a store yet or with that file)"
        ),
        Setting("GATEHOUSE_ENCRYPTION_KEY_FILE", .path, "a file holding `GATEHOUSE_ENCRYPTION_KEY` (not both)"),
        Setting("GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS", .keys, "older keys that still open stored tokens during a rotation"),
        Setting("GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS_FILE", .path, "a file holding them (commas or one per line)"),
    ]

    private static let providers: [Setting] = [
        Setting("GATEHOUSE_GITHUB_CLIENT_ID", .text, "enables GitHub (`github.com`): an OAuth app or a GitHub App"),
        Setting("GATEHOUSE_GITHUB_CLIENT_SECRET", .secret, "its client secret"),
        Setting("GATEHOUSE_GITHUB_AUTHORIZE_URL", .url, "GitHub's authorize endpoint (the emulator's, say)"),
        Setting("GATEHOUSE_GITHUB_TOKEN_URL", .url, "GitHub's token endpoint"),
        Setting("GATEHOUSE_GITHUB_API_URL", .url, "GitHub's API base"),
        Setting("GATEHOUSE_GITHUB_AVATAR_URL_PREFIXES", .list, "URL prefixes avatars may be fetched from"),
        Setting("GATEHOUSE_MICROSOFT_CLIENT_ID", .text, "enables Microsoft (`microsoft.com`)"),
        Setting("GATEHOUSE_MICROSOFT_CLIENT_SECRET", .secret, "its client secret"),
        Setting(
            "GATEHOUSE_MICROSOFT_TENANT", .text, default: "common",
            "`common`, `organizations`, `consumers`, a tenant GUID or domain; every one but `common` restricts `tenant=` to what it admits"),
        Setting("GATEHOUSE_MICROSOFT_ALLOWED_TENANTS", .list, "tenant GUIDs (GUIDs only) a `tenant=` start may name and whose accounts may sign in"),
        Setting("GATEHOUSE_MICROSOFT_LOGIN_URL", .url, "the identity platform's base"),
        Setting("GATEHOUSE_MICROSOFT_GRAPH_URL", .url, "Microsoft Graph's base"),
        Setting("GATEHOUSE_YAHOO_CLIENT_ID", .text, "enables Yahoo (`yahoo.com`)"),
        Setting("GATEHOUSE_YAHOO_CLIENT_SECRET", .secret, "its client secret"),
        Setting("GATEHOUSE_YAHOO_ISSUER", .url, "Yahoo's issuer (the emulator's, say)"),
        Setting("GATEHOUSE_YAHOO_LEGACY_ISSUER", .url, "a second issuer Yahoo's ID tokens may name"),
        Setting("GATEHOUSE_YAHOO_PICTURE_HOSTS", .list, "hosts or URL prefixes pictures may come from besides Yahoo's"),
        Setting("GATEHOUSE_OIDC_<NAME>_ISSUER", .url, "enables the OpenID Connect provider `oidc.<name>` (several at once)"),
        Setting("GATEHOUSE_OIDC_<NAME>_CLIENT_ID", .text, "its client id"),
        Setting("GATEHOUSE_OIDC_<NAME>_CLIENT_SECRET", .secret, "its client secret (none: ID-token sign-in only, no code flow)"),
        Setting(
            "GATEHOUSE_OIDC_<NAME>_AUDIENCES", .list, "the apps' per-platform client ids, also accepted as `aud`/`azp` on `POST /v1/auth/idtoken`"),
        Setting("GATEHOUSE_OIDC_<NAME>_SCOPES", .text, default: "openid profile email", "space-separated scopes"),
        Setting(
            "GATEHOUSE_OIDC_<NAME>_AUTH_METHOD", .choice(["client_secret_basic", "client_secret_post"]),
            "how the client authenticates (default: from discovery, Basic preferred)"),
        Setting(
            "GATEHOUSE_OIDC_<NAME>_NONCE", .choice(["sha256", "raw"]), default: "sha256",
            "how `rawNonce` is compared on `/v1/auth/idtoken`: `raw` for a provider that puts the app's nonce into its ID tokens as it is; such a token carries its own `rawNonce`, so it proves nothing about who presents it (whoever captures one before its app presents it can sign in, link or re-authenticate with it)"
        ),
        Setting("GATEHOUSE_OIDC_<NAME>_PICTURE_HOSTS", .list, "hosts or URL prefixes pictures may come from besides the issuer's origin"),
    ]

    private static let caches: [Setting] = [
        Setting(
            "GATEHOUSE_PROFILE_CACHE_TTL", .seconds(0...SettingKind.longestSeconds), default: "60",
            "seconds live profiles and photos are reused (`0`: off)"),
        Setting(
            "GATEHOUSE_ACCOUNT_CACHE_TTL", .seconds(0...SettingKind.longestSeconds), default: "60",
            "seconds an account, its links and sessions may be answered from memory (`0`: off); writes drop them everywhere"),
        Setting(
            "GATEHOUSE_ACCOUNT_CACHE_SIZE", .count(minimum: 0), default: "10000",
            "accounts held in memory at most (and 32 MiB of them, their links' stored profiles and sealed tokens weighed)"),
        Setting(
            "GATEHOUSE_SERVICE_KEY_CACHE_TTL", .seconds(0...SettingKind.longestSeconds), default: "5",
            "seconds a service key read from the store is trusted (a revocation's delay where no change feed tells it: SQLite, or PostgreSQL's feed down)"
        ),
        Setting(
            "GATEHOUSE_TOKEN_CACHE_TTL", .seconds(0...SettingKind.longestSeconds), default: "30",
            "seconds a provider token set stays decrypted in memory after use"),
        Setting(
            "GATEHOUSE_PHOTO_CACHE_BYTES", .count(minimum: 0), default: "33554432",
            "the photo cache's budget in bytes (a photo counts the buffer holding it: its size rounded up to a power of two)"),
        Setting(
            "GATEHOUSE_PHOTO_FAILURE_SECONDS", .seconds(0...SettingKind.longestSeconds), default: "60",
            "how long a failed photo source is answered `502 photo-unavailable` without a call"),
        Setting(
            "GATEHOUSE_STALE_IF_ERROR", .seconds(0...SettingKind.longestSeconds), default: "3600",
            "seconds past its lifetime a cached profile or photo may be served, marked stale, while its provider fails"),
    ]

    private static let behaviour: [Setting] = [
        Setting(
            "GATEHOUSE_RETURN_TO_ALLOWLIST", .list,
            "`return_to` entries: https origins + path prefixes, native apps' schemes, desktop loopback addresses (no port); a plain `http` page on this machine (a loopback port, `localhost`) only in development mode"
        ),
        Setting(
            "GATEHOUSE_ALLOWED_ORIGINS", .list,
            "exact browser origins for CORS and cookie writes (default: the `return_to` origins), each as browsers send `Origin` (`https://app.example.com`: no path, no default port, an IPv6 literal shortened as in `https://[2001:db8::1]`), `https` outside development mode"
        ),
        Setting(
            "GATEHOUSE_TRUSTED_PROXIES", .list,
            "addresses or CIDR ranges of reverse proxies whose `X-Forwarded-For` names the client and whose `X-Request-Id` is adopted"),
        Setting(
            "GATEHOUSE_APP_NAMES", .list,
            "native and desktop apps' names for the consent page: `return_to` allow-list entry `=` name (`com.example.app:/oauth2redirect=Example`)"),
        Setting("GATEHOUSE_TOKEN_AUDIENCE", .text, "the `aud` of gateway ID tokens (default: the public URL)"),
        Setting("GATEHOUSE_ONE_ACCOUNT_PER_EMAIL", .flag, default: "true", "one account per verified email"),
        Setting("GATEHOUSE_SIGN_IN_METHODS_LOOKUP", .flag, default: "false", "enables `GET /v1/auth/methods`"),
        Setting(
            "GATEHOUSE_RECENT_LOGIN_SECONDS", .seconds(1...SettingKind.longestSeconds), default: "300",
            "how recent a sign-in link, unlink, delete, opening the console and its changes need"),
        Setting(
            "GATEHOUSE_REQUIRE_RESULT_BINDING", .flag, default: "true",
            "every start needs `result_challenge` and the result its `result_verifier`"),
        Setting(
            "GATEHOUSE_REFRESH_RETRY_WINDOW", .seconds(0...60), default: "10",
            "seconds the refresh token spent last still returns the same successor (`0`: strict)"),
        Setting(
            "GATEHOUSE_SESSION_REFRESH_LIMIT", .count(minimum: 1, maximum: GatewayConfiguration.maximumSessionRefreshLimit), default: "10080",
            "refreshes one session may make; the next ends it and its user signs in again"),
        Setting(
            "GATEHOUSE_AUTH_RATE_LIMIT", .count(minimum: 0), default: "60",
            "requests per minute per client (an IPv6 client's /64) on sign-in routes (`0`: off)"),
        Setting("GATEHOUSE_USER_RATE_LIMIT", .count(minimum: 0), default: "600", "requests per minute per signed-in user on `/v1/me…`"),
        Setting("GATEHOUSE_SERVICE_RATE_LIMIT", .count(minimum: 0), default: "6000", "requests per minute per service key on `/v1/users…`"),
        Setting(
            "GATEHOUSE_CREDENTIAL_FAILURE_LIMIT", .count(minimum: 0), default: "300",
            "session cookies and service keys per minute per client (an IPv6 client's /64) that name nothing live; past them the client's cookies and keys are `429` before any look-up, ID tokens never (`0`: off)"
        ),
        Setting(
            "GATEHOUSE_UPSTREAM_TIMEOUT", .seconds(1...3600), default: "10",
            "seconds one provider call may take"),
        Setting("GATEHOUSE_UPSTREAM_TIMEOUTS", .text, "per provider: `github.com=5,microsoft.com=8` (1 to 3600 seconds each)"),
        Setting(
            "GATEHOUSE_UPSTREAM_CONNECTIONS", .count(minimum: 1), default: "256",
            "provider connections kept open for reuse (more concurrent calls than this reconnect)"),
        Setting(
            "GATEHOUSE_UPSTREAM_CALLS", .count(minimum: 1),
            "calls to providers, hooks and webhook receivers in flight at once; as many more wait for a free slot within their timeout in each of two lines (the gateway's own calls; passthrough calls, photos and webhooks), and beyond those a call is refused at once (`503 upstream-unavailable`, `Retry-After: 1`), as is one provider's sign-in, refresh or key call (or a hook call) beyond half of this limit in flight and waiting (default: half of the descriptors kept for provider calls, and under a cgroup memory limit 64 KiB each in a quarter of what the process and the photo cache leave, at least 16)"
        ),
        Setting(
            "GATEHOUSE_UPSTREAM_CALLS_PER_USER", .count(minimum: 1),
            "one user's passthrough calls in flight and waiting together, whoever makes them; one more is refused at once (`429 rate-limited`, `Retry-After: 1`) (default: a sixteenth of `GATEHOUSE_UPSTREAM_CALLS`, at least 4)"
        ),
        Setting(
            "GATEHOUSE_UPSTREAM_CALLS_RESERVED", .count(minimum: 0),
            "slots of `GATEHOUSE_UPSTREAM_CALLS` kept for sign-ins, refreshes, grant revocations, key fetches and hooks, which also wait in lines of their own served first; passthrough calls, photos and webhooks run in the rest, and while those in flight and waiting would fill the rest, one provider's calls (or the hooks') stop starting once they run in half of the reserved slots (when two or more) (default: an eighth, at least 1; at most all but one)"
        ),
        Setting(
            "GATEHOUSE_BREAKER_FAILURES", .count(minimum: 0), default: "5",
            "consecutive failures that open a provider's, a host's or a blocking hook's breaker (`0`: never)"),
        Setting(
            "GATEHOUSE_BREAKER_OPEN_SECONDS", .seconds(1...86_400), default: "30",
            "how long an open breaker stays open"),
        Setting(
            "GATEHOUSE_PHOTO_TIMEOUT", .seconds(1...3600),
            "seconds one photo fetch may take (default: the provider's timeout)"),
        Setting("GATEHOUSE_MAX_PHOTO_BYTES", .count(minimum: 1024), default: "5242880", "the largest photo accepted"),
        Setting(
            "GATEHOUSE_PRIVATE_PHOTO_ADDRESSES", .flag, default: "false",
            "`true` lets photo fetches reach private and loopback addresses (`demo`: `true`)"),
        Setting("GATEHOUSE_PHOTO_PROVIDERS", .list, "provider ids whose photo `/photo` serves first"),
        Setting("GATEHOUSE_API_POLICY", .text, "the provider API passthrough policy: inline JSON or a JSON file's path (default: nothing allowed)"),
        Setting(
            "GATEHOUSE_API_BUFFER_BYTES", .count(minimum: 1), default: "67108864",
            "the bytes of provider API answers read whole (Graph's JSON, to move its paging links) that all calls together hold in memory until written, a service key at most a quarter, signed-in users together half (each an eighth); a call past its share answers `503 upstream-unavailable` with `Retry-After: 1` (at least four times microsoft.com's `maxResponseBytes`, at most 1 TiB)"
        ),
    ]

    private static let hooks: [Setting] = [
        Setting(
            "GATEHOUSE_HOOK_BEFORE_CREATE_URL", .receiverURL,
            "the app's hook asked before a sign-in creates an account (https; plain http to a loopback address only)"),
        Setting(
            "GATEHOUSE_HOOK_BEFORE_SIGN_IN_URL", .receiverURL,
            "the app's hook asked before every sign-in, re-authentication and link is written (https; plain http to loopback only)"),
        Setting(
            "GATEHOUSE_HOOK_SECRETS", .secret,
            "comma-separated Standard Webhooks secrets (`whsec_…`) that sign the hook calls; every one signs (two during a rotation)"),
        Setting("GATEHOUSE_HOOK_TIMEOUT", .seconds(0.1...10), default: "2", "seconds one hook call may take"),
        Setting(
            "GATEHOUSE_HOOK_ON_FAILURE", .choice(["deny", "allow"]), default: "deny",
            "a hook that cannot be asked (down, slow, a malformed answer): `deny` answers `503 hook-unavailable`, `allow` goes on without it (not when the receiver refuses the call, `401`/`403`)"
        ),
    ]

    private static let webhooks: [Setting] = [
        Setting(
            "GATEHOUSE_WEBHOOK_<NAME>_URL", .receiverURL,
            "a receiver of the webhook events (several at once; https, plain http to a loopback address only)"),
        Setting("GATEHOUSE_WEBHOOK_<NAME>_EVENTS", .list, default: "*", "the event types it receives, comma-separated, or `*`"),
        Setting(
            "GATEHOUSE_WEBHOOK_<NAME>_SECRETS", .secret,
            "comma-separated Standard Webhooks secrets (`whsec_…`) that sign its deliveries; every one signs"),
        Setting(
            "GATEHOUSE_WEBHOOK_TIMEOUT", .seconds(1...60), default: "10",
            "seconds one delivery may take; an instance's claim on an event lasts 5 s longer, then another instance may deliver it"),
        Setting(
            "GATEHOUSE_WEBHOOK_RETENTION", .seconds(60...SettingKind.longestSeconds), default: "259200",
            "seconds an undelivered event is kept (then dropped, counted and logged)"),
    ]

    private static let console: [Setting] = [
        Setting(
            "GATEHOUSE_ADMIN_CONSOLE", .flag, default: "false",
            "`true` serves the operators' console at `/admin/` on the public origin (`demo`: `true`, with `octocat` as operator)"),
        Setting(
            "GATEHOUSE_ADMINS", .list,
            "the console's operators, comma-separated: uids, or email addresses a linked provider verifies"),
        Setting(
            "GATEHOUSE_ADMIN_CLAIM", .text,
            "a custom claim that makes its account an operator when `true`; only an operator or an `admin` key changes it, console on or off"),
        Setting(
            "GATEHOUSE_API_DOCS_FILE", .path,
            "an HTML page served at `/docs`: the API reference `scripts/api-docs` renders from `OpenAPI/openapi.yaml`; unset: `/docs` is not served"),
        Setting(
            "GATEHOUSE_AUDIT_RETENTION", .seconds(3600...SettingKind.longestSeconds), default: "7776000",
            "seconds stored audit events (the activity listing) are kept; the log lines are the operator's to keep"),
    ]

    /// The setting `name` is (or matches, for per-provider settings).
    static func setting(named name: String) -> Setting? {
        all.first { $0.matches(name) }
    }

    /// The known names closest to `name`, for "did you mean …?" (edit distance at most 3).
    static func suggestion(for name: String) -> String? {
        let candidates = all.map(\.name).filter { !$0.contains(Setting.placeholder) }
        let scored = candidates.map { ($0, editDistance($0, name)) }.filter { $0.1 <= 3 }
        return scored.min { $0.1 < $1.1 }?.0
    }

    /// Levenshtein distance over characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(Swift.min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// The Configuration article's table (Markdown).
    static func markdownTable() -> String {
        var lines = [
            "| variable | file key | accepts | default | meaning |",
            "|---|---|---|---|---|",
        ]
        for setting in all {
            let key = setting.inFile ? "`\(setting.fileKey)`" : "—"
            let fallback = setting.defaultValue.map { "`\($0)`" } ?? "—"
            lines.append("| `\(setting.name)` | \(key) | \(setting.kind.accepted) | \(fallback) | \(setting.summary) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
