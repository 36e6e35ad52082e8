import Foundation

/// Token buckets by key: `perMinute` tokens, refilled evenly, bursts up to the same number.
/// A value: `RateLimiter` keeps it in an actor, `CredentialFailureLimit` behind a lock.
public struct TokenBuckets: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Date
    }

    private let perMinute: Double
    private var buckets: [String: Bucket] = [:]
    /// Above this many keys, full buckets are dropped (they carry no information).
    public static let prunedAbove = 50_000
    /// The count of keys that starts the next prune: twice what the last one kept, at least
    /// `prunedAbove`. A prune reads every bucket, so with many keys none of whose buckets is
    /// full yet (many clients within one refill), pruning again at every new key would cost a
    /// full pass per request; doubling keeps it to one pass per key added, on average.
    private var nextPrune = TokenBuckets.prunedAbove
    /// The prunes so far (for tests).
    public private(set) var prunes = 0
    /// The keys held (for tests).
    public var keys: Int { buckets.count }

    /// Buckets of `perMinute` tokens (0: every take succeeds and nothing is kept).
    public init(perMinute: Int) {
        self.perMinute = Double(perMinute)
    }

    /// Takes one token for `key`; returns the seconds until one is there when there is none.
    public mutating func take(_ key: String, now: Date) -> Int? {
        guard perMinute > 0 else { return nil }
        var bucket = refilled(key, now: now)
        if bucket.tokens < 1 {
            buckets[key] = bucket
            return wait(bucket)
        }
        bucket.tokens -= 1
        buckets[key] = bucket
        if buckets.count > nextPrune { prune(now: now) }
        return nil
    }

    /// Takes one token for `key` whether or not there is one: a bucket runs into debt, down to
    /// `-perMinute`, so what was spent past the budget (uses checked together, counted after
    /// the fact) is waited out too. Returns the seconds until `key` has a token again, `nil`
    /// when it still has one.
    public mutating func charge(_ key: String, now: Date) -> Int? {
        guard perMinute > 0 else { return nil }
        var bucket = refilled(key, now: now)
        bucket.tokens = max(-perMinute, bucket.tokens - 1)
        buckets[key] = bucket
        if buckets.count > nextPrune { prune(now: now) }
        return bucket.tokens < 1 ? wait(bucket) : nil
    }

    /// The seconds until `key` has a token again, `nil` when it has one now; takes none.
    public func wait(_ key: String, now: Date) -> Int? {
        guard perMinute > 0, buckets[key] != nil else { return nil }
        let bucket = refilled(key, now: now)
        return bucket.tokens < 1 ? wait(bucket) : nil
    }

    private func refilled(_ key: String, now: Date) -> Bucket {
        var bucket = buckets[key] ?? Bucket(tokens: perMinute, updated: now)
        // A clock set back refills nothing and takes nothing; the refill goes on from its new reading.
        bucket.tokens = min(perMinute, bucket.tokens + max(0, now.timeIntervalSince(bucket.updated)) * perMinute / 60)
        bucket.updated = now
        return bucket
    }

    /// The seconds until `bucket` has a token.
    private func wait(_ bucket: Bucket) -> Int {
        max(1, Int(((1 - bucket.tokens) * 60 / perMinute).rounded(.up)))
    }

    private mutating func prune(now: Date) {
        buckets = buckets.filter { _, bucket in bucket.tokens + max(0, now.timeIntervalSince(bucket.updated)) * perMinute / 60 < perMinute }
        nextPrune = max(Self.prunedAbove, 2 * buckets.count)
        prunes += 1
    }
}
