import Foundation
import Testing

@testable import GatehouseCore

/// `RateLimiter`: budgets per key, and the cost of keeping many keys.
@Suite struct RateLimiterTests {
    @Test("a key gets its budget per minute, refilled evenly; another key has its own")
    func budgets() async {
        let limiter = RateLimiter(perMinute: 2)
        let start = Date(timeIntervalSince1970: 1_000_000)
        #expect(await limiter.acquire("a", now: start) == nil)
        #expect(await limiter.acquire("a", now: start) == nil)
        #expect(await limiter.acquire("a", now: start) == 30)
        #expect(await limiter.acquire("b", now: start) == nil)
        #expect(await limiter.acquire("a", now: start.addingTimeInterval(30)) == nil)
    }

    @Test(
        "many keys, none of whose buckets is full yet, are pruned once per doubling, not at every new key; full buckets go at the next prune"
    )
    func pruningIsAmortized() async {
        let limiter = RateLimiter(perMinute: 1)
        let start = Date(timeIntervalSince1970: 1_000_000)
        let keys = RateLimiter.prunedAbove + 10_000
        for index in 0..<keys { _ = await limiter.acquire("client-\(index)", now: start) }
        #expect(await limiter.keys == keys, "no bucket was full: every key is kept")
        #expect(await limiter.prunes == 1)
        // A minute on, every bucket is full again and carries nothing: the next prune drops them.
        let later = start.addingTimeInterval(61)
        var index = keys
        while await limiter.prunes == 1, index < 4 * keys {
            _ = await limiter.acquire("client-\(index)", now: later)
            index += 1
        }
        #expect(await limiter.prunes == 2)
        #expect(await limiter.keys < RateLimiter.prunedAbove)
    }
}
