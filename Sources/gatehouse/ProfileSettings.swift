import ArgumentParser
import Foundation
import GatehouseCore

/// The caching, upstream-resilience, account and browser settings, read from `GATEHOUSE_*`
/// environment variables by both `serve` and `demo`.
enum ProfileSettings {
    /// Applies every variable that is set; a malformed value stops the start with its name.
    static func apply(_ environment: [String: String], to gateway: inout GatewayConfiguration) throws {
        // Kinds and ranges are the catalog's (TypedSettings checks each value against it).
        let settings = TypedSettings(environment: environment)
        let seconds = settings.seconds, count = settings.number, flag = settings.flag, list = settings.list
        if let value = try seconds("GATEHOUSE_PROFILE_CACHE_TTL") { gateway.profileCacheLifetime = value }
        if let value = try seconds("GATEHOUSE_ACCOUNT_CACHE_TTL") { gateway.accountCacheLifetime = value }
        if let value = try count("GATEHOUSE_ACCOUNT_CACHE_SIZE") { gateway.accountCacheCapacity = value }
        if let value = try seconds("GATEHOUSE_SERVICE_KEY_CACHE_TTL") { gateway.serviceKeyCacheLifetime = value }
        if let value = try seconds("GATEHOUSE_TOKEN_CACHE_TTL") { gateway.decryptedTokenLifetime = value }
        if let value = try count("GATEHOUSE_PHOTO_CACHE_BYTES") { gateway.photoCacheBytes = value }
        if let value = try seconds("GATEHOUSE_PHOTO_FAILURE_SECONDS") { gateway.photoFailureLifetime = value }
        if let value = try settings.duration("GATEHOUSE_PHOTO_TIMEOUT") { gateway.photoTimeout = value }
        if let value = try count("GATEHOUSE_MAX_PHOTO_BYTES") { gateway.maxPhotoBytes = value }
        if let value = try seconds("GATEHOUSE_STALE_IF_ERROR") { gateway.staleIfError = value }
        if let value = try settings.duration("GATEHOUSE_UPSTREAM_TIMEOUT") { gateway.defaultUpstreamTimeout = value }
        if let value = try settings.text("GATEHOUSE_UPSTREAM_TIMEOUTS") {
            // `github.com=5,microsoft.com=8`: seconds by provider id.
            for entry in value.split(separator: ",") {
                let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard parts.count == 2, let seconds = TimeInterval(parts[1]), (1...3600).contains(seconds) else {
                    throw ValidationError("GATEHOUSE_UPSTREAM_TIMEOUTS must look like github.com=5,microsoft.com=8 (1 to 3600 seconds each)")
                }
                gateway.upstreamTimeouts[parts[0]] = .milliseconds(Int(seconds * 1000))
            }
        }
        if let value = try count("GATEHOUSE_BREAKER_FAILURES") { gateway.circuitBreaker.failureThreshold = value }
        if let value = try seconds("GATEHOUSE_BREAKER_OPEN_SECONDS") { gateway.circuitBreaker.openDuration = value }
        if let value = try list("GATEHOUSE_PHOTO_PROVIDERS") { gateway.photoProviderOrder = value }
        if let value = try flag("GATEHOUSE_ONE_ACCOUNT_PER_EMAIL") { gateway.oneAccountPerEmail = value }
        if let value = try flag("GATEHOUSE_SIGN_IN_METHODS_LOOKUP") { gateway.signInMethodsLookup = value }
        if let value = try flag("GATEHOUSE_LOG_PROBES") { gateway.logProbes = value }
        if let value = try seconds("GATEHOUSE_RECENT_LOGIN_SECONDS") { gateway.recentLoginWindow = value }
        if let value = try seconds("GATEHOUSE_AUDIT_RETENTION") { gateway.auditRetention = value }
        if let value = try settings.text("GATEHOUSE_TOKEN_AUDIENCE") { gateway.tokenAudience = value }
        if let value = try list("GATEHOUSE_ALLOWED_ORIGINS") {
            guard !value.contains(where: { $0 == "*" || $0 == "null" }) else {
                throw ValidationError("GATEHOUSE_ALLOWED_ORIGINS lists exact origins: no * and no null")
            }
            gateway.allowedOrigins = value
        }
        if let value = try list("GATEHOUSE_TRUSTED_PROXIES") { gateway.trustedProxies = value }
        if let value = try list("GATEHOUSE_APP_NAMES") { gateway.appNames = try appNames(value) }
        if let value = try count("GATEHOUSE_AUTH_RATE_LIMIT") { gateway.authRateLimitPerMinute = value }
        if let value = try count("GATEHOUSE_USER_RATE_LIMIT") { gateway.userRateLimitPerMinute = value }
        if let value = try count("GATEHOUSE_SERVICE_RATE_LIMIT") { gateway.serviceRateLimitPerMinute = value }
        if let value = try count("GATEHOUSE_CREDENTIAL_FAILURE_LIMIT") { gateway.credentialFailureLimitPerMinute = value }
        if let value = try flag("GATEHOUSE_REQUIRE_RESULT_BINDING") { gateway.requireResultBinding = value }
        if let value = try count("GATEHOUSE_SESSION_REFRESH_LIMIT") { gateway.sessionRefreshLimit = value }
        try applyRetryWindow(environment, to: &gateway)
        if let value = try flag("GATEHOUSE_PRIVATE_PHOTO_ADDRESSES") { gateway.allowPrivatePhotoAddresses = value }
        if let value = try settings.text("GATEHOUSE_API_POLICY") { gateway.api = try apiPolicy(value) }
        if let value = try count("GATEHOUSE_API_BUFFER_BYTES") { gateway.apiBufferBytes = value }
        try applyHooks(settings, to: &gateway)
        try applyConsole(settings, to: &gateway)
        if let path = try settings.text("GATEHOUSE_API_DOCS_FILE") { gateway.apiReferencePage = try apiReferencePage(at: path) }
        try applyWebhooks(environment, settings, to: &gateway)
    }

    /// `GATEHOUSE_WEBHOOK_<NAME>_URL`, `_EVENTS`, `_SECRETS` and `GATEHOUSE_WEBHOOK_RETENTION`:
    /// added to the endpoints the command configured before (the demo's sample receiver).
    static func applyWebhooks(_ environment: [String: String], _ settings: TypedSettings, to gateway: inout GatewayConfiguration) throws {
        var webhooks = gateway.webhooks ?? WebhookConfiguration(endpoints: [])
        var touched = false
        for key in environment.keys.sorted() where key.hasPrefix("GATEHOUSE_WEBHOOK_") && key.hasSuffix("_URL") {
            let name = String(key.dropFirst("GATEHOUSE_WEBHOOK_".count).dropLast("_URL".count))
            guard !name.isEmpty else { continue }
            // As the settings catalog writes `<NAME>`: the endpoint's name (`SAMPLE_APP` →
            // `sample-app`) is one per endpoint and holds no `.` (a delivery's id is
            // `<event id>.<endpoint>`).
            guard name.utf8.allSatisfy({ (0x41...0x5A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "_") }) else {
                throw ValidationError("\(key): a webhook endpoint's name (<NAME>) is upper-case letters, digits and underscores")
            }
            let prefix = "GATEHOUSE_WEBHOOK_\(name)_"
            var events: Set<WebhookEventType>?
            if let list = try settings.list(prefix + "EVENTS"), list != ["*"] {
                events = []
                for entry in list {
                    guard let type = WebhookEventType(rawValue: entry) else {
                        throw ValidationError(
                            "\(prefix)EVENTS: \(entry.prefix(64).debugDescription) is not an event type (\(WebhookEventType.allCases.map(\.rawValue).joined(separator: ", ")), or *)"
                        )
                    }
                    events?.insert(type)
                }
            }
            let endpoint = WebhookConfiguration.Endpoint(
                name: name.lowercased().replacingOccurrences(of: "_", with: "-"), url: try settings.text(key) ?? "", events: events,
                secrets: try settings.list(prefix + "SECRETS") ?? [])
            webhooks.endpoints.removeAll { $0.name == endpoint.name }
            webhooks.endpoints.append(endpoint)
            touched = true
        }
        if let retention = try settings.seconds("GATEHOUSE_WEBHOOK_RETENTION") {
            webhooks.retention = retention
            touched = true
        }
        if let timeout = try settings.seconds("GATEHOUSE_WEBHOOK_TIMEOUT") {
            webhooks.timeout = timeout
            touched = true
        }
        guard touched else { return }
        if let problem = webhooks.problem() { throw ValidationError(problem) }
        gateway.webhooks = webhooks
    }

    /// The page `GATEHOUSE_API_DOCS_FILE` names, read once at start: a file that cannot be read,
    /// is larger than 32 MB or is not UTF-8 stops the command, so `/docs` never answers half a page.
    static func apiReferencePage(at path: String) throws -> String {
        let limit = 32 << 20
        // A regular file only: a folder fails to read, and a FIFO would block the start.
        guard (try? FileManager.default.attributesOfItem(atPath: path)[.type] as? FileAttributeType) == .typeRegular,
            let handle = FileHandle(forReadingAtPath: path)
        else {
            throw ValidationError("cannot read GATEHOUSE_API_DOCS_FILE (\(path)): not a readable file; render it with scripts/api-docs")
        }
        defer { try? handle.close() }
        let data: Data
        do { data = try handle.read(upToCount: limit + 1) ?? Data() } catch {
            throw ValidationError("cannot read GATEHOUSE_API_DOCS_FILE (\(path)): \(error.localizedDescription)")
        }
        guard data.count <= limit else { throw ValidationError("GATEHOUSE_API_DOCS_FILE (\(path)) is larger than 32 MB") }
        guard !data.isEmpty, let page = String(data: data, encoding: .utf8) else {
            throw ValidationError("GATEHOUSE_API_DOCS_FILE (\(path)) is empty or not UTF-8 text")
        }
        return page
    }

    /// The operators' console: on only with `GATEHOUSE_ADMIN_CONSOLE=true` and at least one
    /// way to name an operator. `GATEHOUSE_ADMIN_CLAIM` protects its claim console on or off.
    static func applyConsole(_ settings: TypedSettings, to gateway: inout GatewayConfiguration) throws {
        if let claim = try settings.text("GATEHOUSE_ADMIN_CLAIM") { gateway.operatorClaim = claim }
        let enabled = try settings.flag("GATEHOUSE_ADMIN_CONSOLE")
        if enabled == false {
            gateway.console = nil
            return
        }
        // Off unless turned on here or by the command (`demo` presets it).
        guard enabled == true || gateway.console != nil else { return }
        var console = gateway.console ?? ConsoleConfiguration(operators: [])
        if let admins = try settings.list("GATEHOUSE_ADMINS") { console.operators = admins }
        if let claim = try settings.text("GATEHOUSE_ADMIN_CLAIM") { console.operatorClaim = claim }
        if let problem = console.problem() { throw ValidationError(problem) }
        gateway.console = console
    }

    /// `GATEHOUSE_HOOK_*`: set over whatever the command configured before (the demo's sample
    /// hook), URL by URL.
    static func applyHooks(_ settings: TypedSettings, to gateway: inout GatewayConfiguration) throws {
        var hooks = gateway.hooks ?? HookConfiguration(urls: [:], secrets: [])
        var touched = false
        for (event, name) in [(HookEvent.beforeCreate, "GATEHOUSE_HOOK_BEFORE_CREATE_URL"), (.beforeSignIn, "GATEHOUSE_HOOK_BEFORE_SIGN_IN_URL")] {
            if let url = try settings.text(name) {
                hooks.urls[event] = url
                touched = true
            }
        }
        if let secrets = try settings.list("GATEHOUSE_HOOK_SECRETS") {
            hooks.secrets = secrets
            touched = true
        }
        if let timeout = try settings.seconds("GATEHOUSE_HOOK_TIMEOUT") {
            hooks.timeout = timeout
            touched = true
        }
        if let policy = try settings.text("GATEHOUSE_HOOK_ON_FAILURE") {
            hooks.onFailure = HookFailurePolicy(rawValue: policy) ?? .deny
            touched = true
        }
        guard touched else { return }
        if let problem = hooks.problem() { throw ValidationError(problem) }
        gateway.hooks = hooks
    }

    /// `GATEHOUSE_APP_NAMES`: `return_to entry=Display name` pairs (the first `=` splits; a
    /// name has no comma).
    static func appNames(_ entries: [String]) throws -> [String: String] {
        var names: [String: String] = [:]
        for entry in entries {
            guard let equals = entry.firstIndex(of: "="), equals != entry.startIndex, entry.index(after: equals) != entry.endIndex else {
                throw ValidationError("GATEHOUSE_APP_NAMES entries are RETURN_TO=Name: \(entry.prefix(80).debugDescription)")
            }
            let name = entry[entry.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard name.count <= 64, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw ValidationError("GATEHOUSE_APP_NAMES: a name is at most 64 characters, without control characters")
            }
            names[String(entry[..<equals]).trimmingCharacters(in: .whitespaces)] = name
        }
        return names
    }

    /// `GATEHOUSE_API_POLICY`: the passthrough policy as JSON, inline (`{…}`) or in a file.
    static func apiPolicy(_ value: String) throws -> APIPolicy {
        let json: Data
        if value.trimmingCharacters(in: .whitespaces).hasPrefix("{") {
            json = Data(value.utf8)
        } else {
            guard let data = FileManager.default.contents(atPath: value) else {
                throw ValidationError("GATEHOUSE_API_POLICY: cannot read \(value)")
            }
            json = data
        }
        do {
            return try APIPolicy(json: json)
        } catch let error as GatehouseError {
            throw ValidationError("GATEHOUSE_API_POLICY: \(error.detail)")
        }
    }

    /// `GATEHOUSE_REFRESH_RETRY_WINDOW` alone (the key rotation's wait depends on it too).
    static func applyRetryWindow(_ environment: [String: String], to gateway: inout GatewayConfiguration) throws {
        if let seconds = try TypedSettings(environment: environment).seconds("GATEHOUSE_REFRESH_RETRY_WINDOW") {
            gateway.refreshRetryWindow = seconds
        }
    }
}
