import GatehouseCore
import Testing

/// The live provider profiles' cache and the account cache: weighed in bytes, so their budgets
/// bound their memory.
@Suite("The live profile and account caches")
struct ProfileCacheTests {
    @Test(
        "a cached live profile counts its approximate bytes in gatehouse_cache_used (its raw answer included), not one entry, and a second user's adds theirs"
    )
    func cacheChargesBytes() async throws {
        try await withDeployment(profileCacheLifetime: 60) { deployment in
            var octocat = Browser(deployment)
            _ = try await octocat.result(try await octocat.signIn(login: "octocat"))
            let live = try await octocat.send("\(deployment.gatewayURL)/v1/me/providers/github.com/profile")
            #expect(live.status == 200, "\(live.status) \(live.bodyText)")
            let one = try #require(try await ResilienceTests.metric(deployment, "gatehouse_cache_used", ["cache": "profile"]))
            // GitHub's `/user` alone, kept as the profile's raw answer, is over a kilobyte.
            #expect(one > Double(live.body.count), "the cache charged \(one) for a \(live.body.count)-byte profile")

            var pat = Browser(deployment)
            _ = try await pat.result(try await pat.signIn(login: "private-pat"))
            #expect(try await pat.send("\(deployment.gatewayURL)/v1/me/providers/github.com/profile").status == 200)
            let two = try #require(try await ResilienceTests.metric(deployment, "gatehouse_cache_used", ["cache": "profile"]))
            #expect(two > one + 1000, "a second profile added \(two - one)")
        }
    }

    @Test(
        "an account read for /v1/me counts its approximate bytes in gatehouse_cache_used{cache=\"account\"} (the link's stored profile and sealed tokens included), and its sign-out drops them"
    )
    func accountCacheChargesBytes() async throws {
        try await withDeployment { deployment in
            var octocat = Browser(deployment)
            _ = try await octocat.result(try await octocat.signIn(login: "octocat"))
            let me = try await octocat.send("\(deployment.gatewayURL)/v1/me")
            #expect(me.status == 200, "\(me.status) \(me.bodyText)")
            let held = try #require(try await ResilienceTests.metric(deployment, "gatehouse_cache_used", ["cache": "account"]))
            // The link's stored profile holds GitHub's `/user` answer, over a kilobyte, beside the sealed tokens.
            #expect(held > 1500, "the account cache charged \(held)")
            let signedOut = try await octocat.send("\(deployment.gatewayURL)/v1/auth/signout", method: "POST")
            #expect(signedOut.status == 204, "\(signedOut.bodyText)")
            let after = try #require(try await ResilienceTests.metric(deployment, "gatehouse_cache_used", ["cache": "account"]))
            #expect(after == 0, "the signed-out account still weighs \(after)")
        }
    }
}
