import Foundation

/// Token buckets by key (route group and client address): `perMinute` requests, refilled
/// evenly, bursts up to the same number. In-process: with several instances each enforces
/// its own budget, so a client's effective limit is at most `instances × perMinute`.
public actor RateLimiter {
    private struct Bucket {
        var tokens: Double
        var updated: Date
    }

    private let perMinute: Double
    private var buckets: [String: Bucket] = [:]
    /// Above this many keys, full buckets are dropped (they carry no information).
    static let prunedAbove = 50_000
    /// The count of keys that starts the next prune: twice what the last one kept, at least
    /// `prunedAbove`. A prune reads every bucket, so with many keys none of whose buckets is
    /// full yet (many clients within one refill), pruning again at every new key would cost a
    /// full pass per request; doubling keeps it to one pass per key added, on average.
    private var nextPrune = RateLimiter.prunedAbove
    /// The prunes so far (for tests).
    private(set) var prunes = 0
    /// The keys held (for tests).
    var keys: Int { buckets.count }

    /// A limiter allowing `perMinute` requests per key and minute (0 turns it off).
    public init(perMinute: Int) {
        self.perMinute = Double(perMinute)
    }

    /// Takes one token for `key`; returns the seconds to wait when there is none.
    public func acquire(_ key: String, now: Date = Date()) -> Int? {
        guard perMinute > 0 else { return nil }
        var bucket = buckets[key] ?? Bucket(tokens: perMinute, updated: now)
        bucket.tokens = min(perMinute, bucket.tokens + now.timeIntervalSince(bucket.updated) * perMinute / 60)
        bucket.updated = now
        if bucket.tokens < 1 {
            buckets[key] = bucket
            return max(1, Int(((1 - bucket.tokens) * 60 / perMinute).rounded(.up)))
        }
        bucket.tokens -= 1
        buckets[key] = bucket
        if buckets.count > nextPrune { prune(now: now) }
        return nil
    }

    private func prune(now: Date) {
        buckets = buckets.filter { _, bucket in bucket.tokens + now.timeIntervalSince(bucket.updated) * perMinute / 60 < perMinute }
        nextPrune = max(Self.prunedAbove, 2 * buckets.count)
        prunes += 1
    }
}
