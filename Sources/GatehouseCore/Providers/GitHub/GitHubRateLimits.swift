import CurlClient
import Foundation

/// GitHub's rate limits, per token (providers.md §4.3). Once GitHub answers that a token is
/// limited, calls with that token are answered `429 upstream-rate-limited` locally until the
/// limit ends, without calling GitHub: the primary limit (`x-ratelimit-remaining: 0`) until
/// `x-ratelimit-reset`, for the calls to the resource it names (`x-ratelimit-resource`: GitHub
/// counts search, code search and GraphQL apart from the REST API's `core`), and a secondary
/// limit (a `403` or `429` with `retry-after`, or whose message says so, while requests remain)
/// for `retry-after` seconds or a minute, for every call. A limit is neither an outage (no
/// breaker counts it) nor a dead grant. Tokens are kept only as SHA-256 digests.
public actor GitHubRateLimits {
    private var limitedUntil: [String: Date] = [:]
    /// When the last of the held-back tokens' limits ends: past it, every entry has ended.
    private var lastUntil = Date.distantPast
    /// The most tokens tracked at once.
    private let capacity = 10_000

    /// No token limited yet.
    public init() {}

    /// A limit GitHub announced: how long the caller should wait, and until when the token is held back.
    public struct Limit: Sendable, Equatable {
        /// Seconds to wait (`Retry-After` of the gateway's answer).
        public var retryAfter: Int
        /// When the token may call again.
        public var until: Date
        /// The resource whose calls wait (`resource(of:)`), or `nil` for every call.
        public var resource: String?

        /// A limit of `resource`'s calls (`nil`: every call) for `retryAfter` seconds, until `until`.
        public init(retryAfter: Int, until: Date, resource: String? = nil) {
            self.retryAfter = retryAfter
            self.until = until
            self.resource = resource
        }
    }

    /// The rate-limit resource GitHub counts a call to the REST API `path` against: `search`
    /// (`/search/…`), `code_search` (`/search/code`), `graphql` (`/graphql`), else `core`. Other
    /// resources GitHub names (such as `integration_manifest`) are not held back by path: their
    /// calls go to GitHub, which answers for them.
    public static func resource(of path: APIPath) -> String {
        let segments = path.segments
        if segments == ["graphql"] { return "graphql" }
        guard segments.count > 1, segments[0] == "search" else { return "core" }
        return segments[1] == "code" ? "code_search" : "search"
    }

    /// The limit an answer announces, or `nil` when it is not a rate limit: `403`/`429` with
    /// `x-ratelimit-remaining: 0` (primary), or with `retry-after`, or a `429`, or a `403` whose
    /// message names a secondary rate limit (`body`, when it was read). GitHub asks for at
    /// least a minute when it names no time. A hold lasts at most `longestHold`, whatever the
    /// answer names (GitHub's own limits reset within the hour; a time too far off, or one that
    /// is no finite number, from a broken or hostile upstream is read as that).
    public static func limit(status: Int, headers: OutboundHeaders, body: [UInt8]? = nil, now: Date = Date()) -> Limit? {
        guard status == 403 || status == 429 else { return nil }
        let retryAfter = headers["retry-after"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map { min(max(0, $0), longestHold) }
        if headers["x-ratelimit-remaining"] == "0" {
            let reset = headers["x-ratelimit-reset"].flatMap(Double.init).map { $0.isFinite ? $0 - now.timeIntervalSince1970 : Double(longestHold) }
            let seconds = retryAfter ?? reset.map { Int(min(max(1, $0.rounded(.up)), Double(longestHold))) } ?? 60
            let resource = headers["x-ratelimit-resource"].map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            return Limit(
                retryAfter: seconds, until: now.addingTimeInterval(TimeInterval(seconds)),
                resource: resource.flatMap { $0.isEmpty ? nil : $0 } ?? "core")
        }
        let secondary =
            retryAfter != nil || status == 429
            || body.map { String(decoding: $0.prefix(4096), as: UTF8.self).lowercased().contains("secondary rate limit") } == true
        guard secondary else { return nil }
        let seconds = retryAfter ?? 60
        return Limit(retryAfter: seconds, until: now.addingTimeInterval(TimeInterval(seconds)))
    }

    /// The longest a token is held back: an hour.
    public static let longestHold = 3600

    /// Seconds until the token may call `resource` again, or `nil` when it may call now.
    public func wait(for token: String, resource: String = "core", now: Date = Date()) -> Int? {
        // No token held back, or every limit ended (as almost always): nothing to look up, so
        // no digest to compute on every call. Ended limits go at once, not only when their own
        // token calls again, which a refreshed or unlinked token never does.
        guard !limitedUntil.isEmpty else { return nil }
        guard now < lastUntil else {
            limitedUntil = [:]
            return nil
        }
        let digest = SecureRandom.digest(token)
        var longest: Int?
        for key in [digest, Self.key(digest, resource)] {
            guard let until = limitedUntil[key] else { continue }
            let seconds = until.timeIntervalSince(now)
            guard seconds > 0 else {
                limitedUntil[key] = nil
                continue
            }
            longest = max(longest ?? 0, Int(seconds.rounded(.up)))
        }
        return longest
    }

    /// The entry of a token's digest for one resource's limit (the digest alone: every call).
    private static func key(_ digest: String, _ resource: String?) -> String {
        resource.map { "\(digest)|\($0)" } ?? digest
    }

    /// Holds the token back until the limit ends. Bounded: past `capacity` tokens, ended limits
    /// are dropped, and if all are still running, the ones ending soonest.
    public func hold(token: String, _ limit: Limit, now: Date = Date()) {
        if limitedUntil.count >= capacity {
            limitedUntil = limitedUntil.filter { $0.value > now }
            if limitedUntil.count >= capacity {
                let kept = limitedUntil.sorted { $0.value > $1.value }.prefix(capacity / 2)
                limitedUntil = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
            }
        }
        limitedUntil[Self.key(SecureRandom.digest(token), limit.resource)] = limit.until
        lastUntil = max(lastUntil, limit.until)
    }

    /// How many limits are held, of tokens or of their resources (tests).
    var count: Int { limitedUntil.count }
}
