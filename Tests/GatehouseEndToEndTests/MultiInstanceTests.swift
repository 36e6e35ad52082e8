import CurlClient
import Foundation
import GatehouseCore
import GatehouseTestSupport
import Testing

/// Several gateway instances over one PostgreSQL (issue #7): nothing about a user's flow may
/// depend on which instance answers.
@Suite("Several instances on PostgreSQL")
struct MultiInstanceTests {
    @Test(
        "start on A, callback on B, result on C (taken once across instances), /v1/me and the live profile on every instance, sign-out on one ends the session everywhere"
    )
    func flowAcrossInstances() async throws {
        let deployment = try await TestDeployment(database: try await PostgresTestServer.freshDatabase(), instances: 3)
        let (a, b, c) = (deployment.gatewayURLs[0], deployment.gatewayURLs[1], deployment.gatewayURLs[2])
        var browser = Browser(deployment)
        let callback = try await browser.authorize(login: "octocat")
        #expect(callback.hasPrefix(a + "/v1/auth/github.com/callback?"))
        // The load balancer sends the provider's redirect to another instance.
        let answered = try await browser.send(b + callback.dropFirst(a.count))
        #expect(answered.status == 303)
        let location = try #require(answered.headers["location"])
        let resultID = try #require(location.range(of: "#gatehouse_result=").map { String(location[$0.upperBound...]) })

        func takeResult(on instance: String) async throws -> OutboundResponse {
            try await browser.send(
                "\(instance)/v1/auth/result", method: "POST", headers: ["Content-Type": "application/json"],
                body: Array(#"{"result":"\#(resultID)"}"#.utf8))
        }
        let result = try await takeResult(on: c)
        #expect(result.status == 200)
        let uid = try #require((try jsonObject(result)["user"] as? [String: Any])?["uid"] as? String)
        let again = try await takeResult(on: a)
        #expect(again.status == 404)
        #expect(try jsonObject(again)["code"] as? String == "result-not-found")

        for instance in [a, b, c] {
            let me = try await browser.send("\(instance)/v1/me")
            #expect(me.status == 200)
            #expect(try jsonObject(me)["uid"] as? String == uid)
        }
        // Tokens sealed by B (same encryption key) open on C.
        let live = try await browser.send("\(c)/v1/me/providers/github.com/profile")
        #expect(live.status == 200)
        #expect(try jsonObject(live)["username"] as? String == "octocat")

        let cookies = browser.jar.header
        #expect(try await browser.send("\(a)/v1/auth/signout", method: "POST", headers: ["Origin": a]).status == 204)
        for instance in [b, c] {
            let stale = try await deployment.client.execute(OutboundRequest(url: "\(instance)/v1/me", headers: cookies))
            #expect(stale.status == 401)
        }
        await deployment.stop()
    }

    @Test("a started sign-in's state is single-use across instances: the same callback replayed on another instance is refused")
    func callbackReplayAcrossInstances() async throws {
        let deployment = try await TestDeployment(database: try await PostgresTestServer.freshDatabase(), instances: 2)
        let (a, b) = (deployment.gatewayURLs[0], deployment.gatewayURLs[1])
        var browser = Browser(deployment)
        let callback = try await browser.authorize(login: "octocat")
        #expect(try await browser.send(callback).status == 303)
        let replay = try await browser.send(b + callback.dropFirst(a.count))
        #expect(replay.status == 400)
        #expect(try jsonObject(replay)["code"] as? String == "invalid-state")
        await deployment.stop()
    }
}

extension MultiInstanceTests {
    @Test("an expired Microsoft token, 21 concurrent profile calls spread over three instances: exactly one refresh reaches the provider")
    func oneRefreshAcrossInstances() async throws {
        let deployment = try await TestDeployment(database: try await PostgresTestServer.freshDatabase(), instances: 3)
        var browser = Browser(deployment)
        #expect(try await MicrosoftSignInTests.signIn(&browser, MicrosoftSignInTests.adele).status == 200)
        _ = try await deployment.control("expire-tokens", "{}")
        let cookies = browser.jar.header
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<21 {
                let url = "\(deployment.gatewayURLs[index % 3])/v1/me/providers/microsoft.com/profile"
                group.addTask { try await deployment.client.execute(OutboundRequest(url: url, headers: cookies)).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 21))
        // The sign-in's code exchange and one refresh; the emulator revokes a used refresh
        // token, so a second refresh with the old one would also have failed a request.
        #expect(try await deployment.emulatorStats()["POST /microsoft/common/oauth2/v2.0/token"] == 2)
        await deployment.stop()
    }
}
