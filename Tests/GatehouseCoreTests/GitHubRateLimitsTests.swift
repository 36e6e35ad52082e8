import CurlClient
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

    @Test(
        "an answer naming a time too far off, or one that is no finite number, holds the token back an hour at most, and never stops the process"
    )
    func absurdTimesAreBounded() async {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let cases: [OutboundHeaders] = [
            ["x-ratelimit-remaining": "0", "x-ratelimit-reset": "1e300"], ["x-ratelimit-remaining": "0", "x-ratelimit-reset": "inf"],
            ["x-ratelimit-remaining": "0", "x-ratelimit-reset": "nan"], ["x-ratelimit-remaining": "0", "x-ratelimit-reset": "-1e300"],
            ["retry-after": "9223372036854775807"], ["x-ratelimit-remaining": "0", "retry-after": "9223372036854775807"],
        ]
        for (index, headers) in cases.enumerated() {
            let limit = GitHubRateLimits.limit(status: 403, headers: headers, now: now)
            let held = limit.map { (1...3600).contains($0.retryAfter) }
            #expect(held == true, "\(headers)")
            let limits = GitHubRateLimits()
            if let limit { await limits.hold(token: "gho_\(index)", limit, now: now) }
            let wait = await limits.wait(for: "gho_\(index)", now: now)
            let bounded = wait.map { (1...3600).contains($0) }
            #expect(bounded == true, "\(headers): \(String(describing: wait))")
        }
    }

    @Test(
        "a primary limit holds back the token's calls to its own resource only (search, code search, GraphQL, the core REST API); a secondary limit, or one naming no resource, holds back every call"
    )
    func limitsPerResource() async throws {
        let limits = GitHubRateLimits()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let reset = "\(Int(now.timeIntervalSince1970) + 120)"
        func announced(_ headers: OutboundHeaders, status: Int = 403) -> GitHubRateLimits.Limit? {
            GitHubRateLimits.limit(status: status, headers: headers, now: now)
        }
        let search = announced(["x-ratelimit-remaining": "0", "x-ratelimit-reset": reset, "x-ratelimit-resource": "search"])
        #expect(search?.resource == "search" && search?.retryAfter == 120)
        await limits.hold(token: "gho_a", search!, now: now)
        #expect(await limits.wait(for: "gho_a", resource: "search", now: now) == 120)
        #expect(await limits.wait(for: "gho_a", resource: "core", now: now) == nil, "the REST API still answers")
        #expect(await limits.wait(for: "gho_a", resource: "graphql", now: now) == nil)
        #expect(await limits.wait(for: "gho_b", resource: "search", now: now) == nil)

        let core = announced(["x-ratelimit-remaining": "0", "x-ratelimit-reset": reset], status: 429)
        #expect(core?.resource == "core", "no resource named: GitHub's REST API")
        await limits.hold(token: "gho_b", core!, now: now)
        #expect(await limits.wait(for: "gho_b", resource: "core", now: now) == 120)
        #expect(await limits.wait(for: "gho_b", resource: "search", now: now) == nil)

        let secondary = announced(["retry-after": "30"])
        #expect(secondary != nil && secondary?.resource == nil)
        await limits.hold(token: "gho_c", secondary!, now: now)
        for resource in ["core", "search", "code_search", "graphql"] {
            #expect(await limits.wait(for: "gho_c", resource: resource, now: now) == 30, "\(resource)")
        }

        #expect(GitHubRateLimits.resource(of: try APIPath(raw: "/search/repositories")) == "search")
        #expect(GitHubRateLimits.resource(of: try APIPath(raw: "/search/code")) == "code_search")
        #expect(GitHubRateLimits.resource(of: try APIPath(raw: "/search/codes")) == "search")
        #expect(GitHubRateLimits.resource(of: try APIPath(raw: "/graphql")) == "graphql")
        #expect(GitHubRateLimits.resource(of: try APIPath(raw: "/graphql/x")) == "core")
        #expect(GitHubRateLimits.resource(of: try APIPath(raw: "/user/repos")) == "core")
        #expect(GitHubRateLimits.resource(of: try APIPath(raw: "/searching")) == "core")
    }
}
