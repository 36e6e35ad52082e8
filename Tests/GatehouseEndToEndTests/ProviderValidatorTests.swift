import CurlClient
import Foundation
import GRDB
import GatehouseCore
import Testing

/// Live profile reads that spend no provider quota when nothing changed: GitHub answers
/// validators and `304 Not Modified` (which its rate limit does not count), the gateway sends
/// the stored validators back; and one source of truth for Microsoft's tenant.
@Suite("Provider validators and the link's facts")
struct ProviderValidatorTests {
    /// The stored snapshot of octocat's GitHub link and its last update.
    static func snapshot(_ deployment: TestDeployment) async throws -> (json: String, updatedAt: String) {
        try await openSQLite(deployment.databasePath).read { db in
            let row = try #require(try Row.fetchOne(db, sql: "SELECT profile_json, updated_at FROM provider_links WHERE provider_id = 'github.com'"))
            let data: Data = row["profile_json"]
            let updated: DatabaseValue = row["updated_at"]
            return (String(decoding: data, as: UTF8.self), "\(updated)")
        }
    }

    /// The emulator's count of `304`s by `METHOD path`.
    static func notModified(_ deployment: TestDeployment) async throws -> [String: Int] {
        let response = try await deployment.client.execute(OutboundRequest(url: "\(deployment.emulatorURL)/_emulator/stats/not-modified"))
        return try JSONDecoder().decode([String: Int].self, from: Data(response.body))
    }

    @Test(
        "a refreshed GitHub profile that did not change is answered from GitHub's 304 (If-None-Match with the stored validators): the emulator counts the 304s, the rate limit is not spent, the snapshot is untouched; a changed one is normalized anew"
    )
    func unchangedGitHubProfileCostsA304() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
            let stored = try await Self.snapshot(deployment)
            #expect(stored.json.contains("\"validators\""), "the sign-in keeps GitHub's validators: \(stored.json)")
            let before = try await Self.notModified(deployment)

            let refreshed = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/github.com/profile?refresh=true")
            #expect(refreshed.status == 200, "\(refreshed.bodyText)")
            #expect(try jsonObject(refreshed)["username"] as? String == "octocat")
            #expect(try jsonObject(refreshed)["validators"] == nil, "validators are never shown")
            let after = try await Self.notModified(deployment)
            #expect((after["GET /github-api/user"] ?? 0) == (before["GET /github-api/user"] ?? 0) + 1, "\(after)")
            #expect((after["GET /github-api/user/emails"] ?? 0) == (before["GET /github-api/user/emails"] ?? 0) + 1, "\(after)")
            #expect(try await Self.snapshot(deployment) == stored, "an unchanged profile writes nothing")
            let metrics = try await deployment.client.execute(OutboundRequest(url: deployment.operationsURL + "/metrics")).bodyText
            let holds =
                metrics.contains(#"gatehouse_upstream_calls_total{provider="github.com",endpoint="profile",outcome="not-modified"}"#)
                || metrics.split(separator: "\n").contains { $0.hasPrefix("gatehouse_upstream_calls_total") && $0.contains("not-modified") }
            #expect(
                holds,
                "no not-modified upstream calls counted")

            // GitHub changed the profile: a 200 without a validator match, normalized and stored.
            try await deployment.control(
                "faults",
                #"{"endpoint": "GET /github-api/user", "status": 200, "times": 1, "headers": {"ETag": "W/\"renamed\""}, "body": "{\"login\": \"octocat\", \"id\": 583231, \"name\": \"The Renamed Octocat\", \"avatar_url\": \"https://avatars.githubusercontent.com/u/583231?v=4\", \"html_url\": \"https://github.com/octocat\"}"}"#
            )
            let changed = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/github.com/profile?refresh=true")
            #expect(try jsonObject(changed)["displayName"] as? String == "The Renamed Octocat", "\(changed.bodyText)")
            let rewritten = try await Self.snapshot(deployment)
            #expect(rewritten.json.contains("The Renamed Octocat") && rewritten.json.contains(#"W/\"renamed\""#), "\(rewritten.json)")
        }
    }

    @Test("the emulator's GitHub API: ETag on /user, /user/emails and /user/repos, 304 to If-None-Match without spending the rate limit")
    func emulatorAnswersValidators() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
            let token = try #require(await deployment.emulator.issuedAccessTokens().last)
            for path in ["/user", "/user/emails", "/user/repos"] {
                let headers: OutboundHeaders = ["Authorization": "Bearer \(token)", "User-Agent": "validator-test"]
                let first = try await deployment.client.execute(OutboundRequest(url: "\(deployment.emulatorURL)/github-api\(path)", headers: headers))
                let tag = try #require(first.headers["etag"], "\(path)")
                #expect(tag.hasPrefix("W/\""))
                var conditional = headers
                conditional.add("If-None-Match", tag)
                let second = try await deployment.client.execute(
                    OutboundRequest(url: "\(deployment.emulatorURL)/github-api\(path)", headers: conditional))
                #expect(second.status == 304 && second.body.isEmpty && second.headers["etag"] == tag, "\(path)")
                #expect(second.headers["x-ratelimit-remaining"] == first.headers["x-ratelimit-remaining"], "a 304 is free: \(path)")
            }
        }
    }

    @Test("the live Microsoft profile names the tenant its link has (the ID token's tid), not null")
    func microsoftProfileKeepsTheTenant() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: MicrosoftSignInTests.adele, provider: "microsoft.com").status == 200)
            let live = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/microsoft.com/profile?refresh=true")
            #expect(live.status == 200, "\(live.bodyText)")
            #expect(try jsonObject(live)["tenantId"] as? String == "8eaef023-2b34-4da1-9baa-8bc8c9d6a490", "\(live.bodyText)")
        }
    }
}
