import Foundation

/// GitHub's primary rate limit, per token: once an answer says `x-ratelimit-remaining: 0`,
/// calls with that token are answered `429 upstream-rate-limited` locally until
/// `x-ratelimit-reset`, without calling GitHub (providers.md §4.3). Tokens are kept only as
/// SHA-256 digests.
actor GitHubRateLimits {
    private var exhaustedUntil: [String: Date] = [:]

    /// Seconds until the token may call again, or `nil` when it may call now.
    func wait(for token: String) -> Int? {
        let key = SecureRandom.digest(token)
        guard let until = exhaustedUntil[key] else { return nil }
        let seconds = until.timeIntervalSinceNow
        guard seconds > 0 else {
            exhaustedUntil[key] = nil
            return nil
        }
        return Int(seconds.rounded(.up))
    }

    /// Remembers an exhausted limit (bounded: at most 10 000 tokens are tracked).
    func exhausted(token: String, until reset: Date) {
        if exhaustedUntil.count >= 10_000 { exhaustedUntil = exhaustedUntil.filter { $0.value > Date() } }
        exhaustedUntil[SecureRandom.digest(token)] = reset
    }
}
