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

    @Test("a clock set back takes no tokens: the budget is as it was, and refills from the clock's new reading")
    func clockSetBack() async {
        let limiter = RateLimiter(perMinute: 2)
        let start = Date(timeIntervalSince1970: 1_000_000)
        #expect(await limiter.acquire("a", now: start) == nil)
        let back = start.addingTimeInterval(-3600)
        #expect(await limiter.acquire("a", now: back) == nil)
        #expect(await limiter.acquire("a", now: back) == 30)
        #expect(await limiter.acquire("a", now: back.addingTimeInterval(30)) == nil, "a token 30 s after the new reading")
    }

    @Test("charged uses run a bucket into debt, at most a minute's, which is waited out before the next token")
    func chargesRunIntoDebt() {
        var buckets = TokenBuckets(perMinute: 3)
        let start = Date(timeIntervalSince1970: 1_000_000)
        var waits: [Int?] = []
        for _ in 0..<5 { waits.append(buckets.charge("a", now: start)) }
        // Three tokens, one every 20 s: 2, 1, then 0, -1 and -2, a token again after 20, 40 and 60 s.
        #expect(waits == [nil, nil, 20, 40, 60])
        #expect(buckets.wait("a", now: start.addingTimeInterval(59)) == 1)
        #expect(buckets.wait("a", now: start.addingTimeInterval(60)) == nil)
        for _ in 0..<10 { _ = buckets.charge("b", now: start) }
        #expect(buckets.wait("b", now: start) == 80, "the debt stops at a minute's worth: -3 tokens, 80 s to the next")
        #expect(buckets.wait("c", now: start) == nil, "a key never charged has its budget")
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
