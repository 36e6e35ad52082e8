import Foundation

/// Token buckets by key (route group and client address): `perMinute` requests, refilled
/// evenly, bursts up to the same number. In-process: with several instances each enforces
/// its own budget, so a client's effective limit is at most `instances × perMinute`.
public actor RateLimiter {
    private var buckets: TokenBuckets
    /// Above this many keys, full buckets are dropped (they carry no information).
    static let prunedAbove = TokenBuckets.prunedAbove
    /// The prunes so far (for tests).
    var prunes: Int { buckets.prunes }
    /// The keys held (for tests).
    var keys: Int { buckets.keys }

    /// A limiter allowing `perMinute` requests per key and minute (0 turns it off).
    public init(perMinute: Int) {
        buckets = TokenBuckets(perMinute: perMinute)
    }

    /// Takes one token for `key`; returns the seconds to wait when there is none.
    public func acquire(_ key: String, now: Date = Date()) -> Int? {
        buckets.take(key, now: now)
    }
}
