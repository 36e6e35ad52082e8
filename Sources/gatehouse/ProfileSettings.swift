import ArgumentParser
import Foundation
import GatehouseCore

/// The caching, upstream-resilience, account and browser settings, read from `GATEHOUSE_*`
/// environment variables by both `serve` and `demo`.
enum ProfileSettings {
    /// Applies every variable that is set; a malformed value stops the start with its name.
    static func apply(_ environment: [String: String], to gateway: inout GatewayConfiguration) throws {
        func seconds(_ name: String, minimum: TimeInterval = 0) throws -> TimeInterval? {
            guard let value = environment[name] else { return nil }
            guard let seconds = TimeInterval(value), seconds >= minimum, seconds.isFinite else {
                throw ValidationError("\(name) must be a number of seconds >= \(Int(minimum))")
            }
            return seconds
        }
        func count(_ name: String) throws -> Int? {
            guard let value = environment[name] else { return nil }
            guard let number = Int(value), number >= 0 else { throw ValidationError("\(name) must be a whole number >= 0") }
            return number
        }
        if let value = try seconds("GATEHOUSE_PROFILE_CACHE_TTL") { gateway.profileCacheLifetime = value }
        if let value = try seconds("GATEHOUSE_ACCOUNT_CACHE_TTL") { gateway.accountCacheLifetime = value }
        if let value = try count("GATEHOUSE_ACCOUNT_CACHE_SIZE") { gateway.accountCacheCapacity = value }
        if let value = try seconds("GATEHOUSE_SERVICE_KEY_CACHE_TTL") { gateway.serviceKeyCacheLifetime = value }
        if let value = try seconds("GATEHOUSE_TOKEN_CACHE_TTL") { gateway.decryptedTokenLifetime = value }
        if let value = try count("GATEHOUSE_PHOTO_CACHE_BYTES") { gateway.photoCacheBytes = value }
        if let value = try seconds("GATEHOUSE_PHOTO_FAILURE_SECONDS") { gateway.photoFailureLifetime = value }
        if let value = try seconds("GATEHOUSE_PHOTO_TIMEOUT", minimum: 1) { gateway.photoTimeout = .milliseconds(Int(value * 1000)) }
        if let value = try count("GATEHOUSE_MAX_PHOTO_BYTES") {
            guard value >= 1024 else { throw ValidationError("GATEHOUSE_MAX_PHOTO_BYTES must be at least 1024") }
            gateway.maxPhotoBytes = value
        }
        if let value = try seconds("GATEHOUSE_STALE_IF_ERROR") { gateway.staleIfError = value }
        if let value = try seconds("GATEHOUSE_UPSTREAM_TIMEOUT", minimum: 1) { gateway.defaultUpstreamTimeout = .milliseconds(Int(value * 1000)) }
        if let value = environment["GATEHOUSE_UPSTREAM_TIMEOUTS"] {
            // `github.com=5,microsoft.com=8`: seconds by provider id.
            for entry in value.split(separator: ",") {
                let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard parts.count == 2, let seconds = TimeInterval(parts[1]), seconds >= 1, seconds.isFinite else {
                    throw ValidationError("GATEHOUSE_UPSTREAM_TIMEOUTS must look like github.com=5,microsoft.com=8")
                }
                gateway.upstreamTimeouts[parts[0]] = .milliseconds(Int(seconds * 1000))
            }
        }
        if let value = try count("GATEHOUSE_BREAKER_FAILURES") { gateway.circuitBreaker.failureThreshold = value }
        if let value = try seconds("GATEHOUSE_BREAKER_OPEN_SECONDS", minimum: 1) { gateway.circuitBreaker.openDuration = value }
        func list(_ name: String) -> [String]? {
            environment[name].map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
        }
        func flag(_ name: String) throws -> Bool? {
            guard let value = environment[name] else { return nil }
            guard value == "true" || value == "false" else { throw ValidationError("\(name) must be true or false") }
            return value == "true"
        }
        if let value = list("GATEHOUSE_PHOTO_PROVIDERS") { gateway.photoProviderOrder = value }
        if let value = try flag("GATEHOUSE_ONE_ACCOUNT_PER_EMAIL") { gateway.oneAccountPerEmail = value }
        if let value = try flag("GATEHOUSE_SIGN_IN_METHODS_LOOKUP") { gateway.signInMethodsLookup = value }
        if let value = try seconds("GATEHOUSE_RECENT_LOGIN_SECONDS", minimum: 1) { gateway.recentLoginWindow = value }
        if let value = environment["GATEHOUSE_TOKEN_AUDIENCE"] { gateway.tokenAudience = value }
        if let value = list("GATEHOUSE_ALLOWED_ORIGINS") {
            guard !value.contains(where: { $0 == "*" || $0 == "null" }) else {
                throw ValidationError("GATEHOUSE_ALLOWED_ORIGINS lists exact origins: no * and no null")
            }
            gateway.allowedOrigins = value
        }
        if let value = list("GATEHOUSE_TRUSTED_PROXIES") { gateway.trustedProxies = value }
        if let value = try count("GATEHOUSE_AUTH_RATE_LIMIT") { gateway.authRateLimitPerMinute = value }
        if let value = try count("GATEHOUSE_USER_RATE_LIMIT") { gateway.userRateLimitPerMinute = value }
        if let value = try count("GATEHOUSE_SERVICE_RATE_LIMIT") { gateway.serviceRateLimitPerMinute = value }
        if let value = try flag("GATEHOUSE_REQUIRE_RESULT_BINDING") { gateway.requireResultBinding = value }
        try applyRetryWindow(environment, to: &gateway)
        if let value = try flag("GATEHOUSE_PRIVATE_PHOTO_ADDRESSES") { gateway.allowPrivatePhotoAddresses = value }
        if let value = environment["GATEHOUSE_API_POLICY"] { gateway.api = try apiPolicy(value) }
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
        guard let value = environment["GATEHOUSE_REFRESH_RETRY_WINDOW"] else { return }
        guard let seconds = TimeInterval(value), (0...60).contains(seconds) else {
            throw ValidationError("GATEHOUSE_REFRESH_RETRY_WINDOW must be a number of seconds between 0 and 60")
        }
        gateway.refreshRetryWindow = seconds
    }
}
