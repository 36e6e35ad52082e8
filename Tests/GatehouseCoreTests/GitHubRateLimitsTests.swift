import Foundation
import Testing

@testable import GatehouseCore

/// The tokens GitHub limited: held back until their limits end, and no longer.
@Suite("GitHub rate limits")
struct GitHubRateLimitsTests {
    @Test("a held token waits until its limit ends; once every limit has ended none is kept, whichever token calls")
    func endedLimitsAreDropped() async {
        let limits = GitHubRateLimits()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        await limits.hold(token: "gho_a", .init(retryAfter: 60, until: now.addingTimeInterval(60)), now: now)
        await limits.hold(token: "gho_b", .init(retryAfter: 30, until: now.addingTimeInterval(30)), now: now)
        #expect(await limits.wait(for: "gho_a", now: now) == 60)
        #expect(await limits.wait(for: "gho_b", now: now.addingTimeInterval(10)) == 20)
        #expect(await limits.wait(for: "gho_c", now: now) == nil)
        // b's limit has ended, a's has not: a is still held back.
        #expect(await limits.wait(for: "gho_c", now: now.addingTimeInterval(45)) == nil)
        #expect(await limits.wait(for: "gho_a", now: now.addingTimeInterval(45)) == 15)
        // Past the last limit, a call with a token never limited (a refreshed one) finds the
        // list emptied: the limited tokens, which may never call again, are not kept.
        #expect(await limits.wait(for: "gho_new", now: now.addingTimeInterval(61)) == nil)
        #expect(await limits.count == 0)
        await limits.hold(token: "gho_new", .init(retryAfter: 5, until: now.addingTimeInterval(70)), now: now.addingTimeInterval(65))
        #expect(await limits.wait(for: "gho_new", now: now.addingTimeInterval(66)) == 4)
    }
}
