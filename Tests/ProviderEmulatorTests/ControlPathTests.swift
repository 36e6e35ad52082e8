import CurlClient
import Foundation
import Testing

/// The emulator's control path: seeded users, call counts, token expiry and fault injection.
@Suite struct ControlPathTests {
    @Test func seededUsersAreListedWithTheirTraits() async throws {
        try await withEmulator { base, http in
            let response = try await http.execute(OutboundRequest(url: "\(base)/_emulator/users"))
            let users = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [[String: Any]])
            func traits(_ hint: String) -> [String] {
                users.first { $0["provider"] as? String == "github.com" && $0["hint"] as? String == hint }?["traits"] as? [String] ?? []
            }
            #expect(traits("octocat").contains("public-email"))
            #expect(traits("private-pat").contains("private-email"))
            #expect(traits("unverified-uma").contains("unverified-emails-only"))
        }
    }

    @Test func statsCountCallsByMethodAndPathAsReceived() async throws {
        try await withEmulator { base, http in
            let token = try await GitHubEmulatorTests.token(base, http)
            for _ in 0..<3 {
                _ = try await http.execute(GitHubEmulatorTests.api("\(base)/github-api/user", token: token))
            }
            let stats = try await http.execute(OutboundRequest(url: "\(base)/_emulator/stats"))
            let counts = try #require(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Int])
            #expect(counts["GET /github-api/user"] == 3)
            #expect(counts["POST /github/login/oauth/access_token"] == 1)
            #expect(counts["GET /github/login/oauth/authorize"] == 1)
            let holds = counts.keys.allSatisfy { !$0.contains("_emulator") }
            #expect(holds)
        }
    }

    @Test func expiringTokensMakesEveryIssuedTokenFail() async throws {
        try await withEmulator { base, http in
            let token = try await GitHubEmulatorTests.token(base, http)
            #expect(try await http.execute(GitHubEmulatorTests.api("\(base)/github-api/user", token: token)).status == 200)
            let expired = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/_emulator/expire-tokens"))
            #expect(try expired.jsonObject()["expired"] as? Int == 1)
            let after = try await http.execute(GitHubEmulatorTests.api("\(base)/github-api/user", token: token))
            #expect(after.status == 401)
            #expect(try after.jsonObject()["message"] as? String == "Bad credentials")
        }
    }

    @Test func aFaultAppliesTheGivenNumberOfTimesThenStops() async throws {
        try await withEmulator { base, http in
            let fault =
                #"{"endpoint": "GET /github-api/user", "status": 429, "headers": {"Retry-After": "7"}, "body": "{\"message\":\"slow down\"}", "times": 2}"#
            let created = try await http.execute(
                OutboundRequest(
                    method: "POST", url: "\(base)/_emulator/faults", headers: ["Content-Type": "application/json"], body: Array(fault.utf8)))
            #expect(created.status == 201)
            let token = try await GitHubEmulatorTests.token(base, http)
            for _ in 0..<2 {
                let limited = try await http.execute(GitHubEmulatorTests.api("\(base)/github-api/user", token: token))
                #expect(limited.status == 429)
                #expect(limited.headers["retry-after"] == "7")
                #expect(limited.bodyText == #"{"message":"slow down"}"#)
            }
            #expect(try await http.execute(GitHubEmulatorTests.api("\(base)/github-api/user", token: token)).status == 200)
        }
    }

    @Test func aFaultWithoutTimesLastsUntilCleared() async throws {
        try await withEmulator { base, http in
            let fault = #"{"endpoint": "GET /github-api/user", "status": 503}"#
            _ = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/_emulator/faults", body: Array(fault.utf8)))
            for _ in 0..<4 {
                #expect(try await http.execute(GitHubEmulatorTests.api("\(base)/github-api/user", token: nil)).status == 503)
            }
            let cleared = try await http.execute(OutboundRequest(method: "DELETE", url: "\(base)/_emulator/faults"))
            #expect(cleared.status == 204)
            #expect(try await http.execute(GitHubEmulatorTests.api("\(base)/github-api/user", token: nil)).status == 401)
        }
    }

    @Test func aDelayFaultDelaysThenServesTheRealAnswer() async throws {
        try await withEmulator { base, http in
            let fault = #"{"endpoint": "GET /github-api/user", "delayMs": 300, "times": 1}"#
            _ = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/_emulator/faults", body: Array(fault.utf8)))
            // A client whose total timeout is shorter than the delay gives up; the next call is prompt.
            await #expect(throws: (any Error).self) {
                try await http.execute(OutboundRequest(url: "\(base)/github-api/user", headers: ["User-Agent": "t"], timeout: .milliseconds(100)))
            }
            #expect(try await http.execute(GitHubEmulatorTests.api("\(base)/github-api/user", token: nil)).status == 401)
        }
    }

    @Test func aFaultWithoutEndpointIsRefused() async throws {
        try await withEmulator { base, http in
            let response = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/_emulator/faults", body: Array("{}".utf8)))
            #expect(response.status == 400)
        }
    }
}

/// Hostile values the emulator refuses without stopping: it is a development server, but a
/// client's bad number must not bring down every other test's provider.
@Suite struct EmulatorHostileInputTests {
    @Test("paging numbers at the integer limit and out-of-range fault statuses answer an error, and the emulator answers on")
    func extremeNumbersAreAnswered() async throws {
        try await withEmulator { base, http in
            let github = try await GitHubEmulatorTests.token(base, http, scope: "repo")
            let pages = try await http.execute(
                GitHubEmulatorTests.api("\(base)/github-api/user/repos?per_page=2&page=\(Int.max)", token: github))
            #expect(pages.status == 200 && pages.bodyText == "[]", "\(pages.status): \(pages.bodyText)")
            #expect(pages.headers["link"]?.contains("rel=\"next\"") != true)

            let graph = try #require(
                try await MicrosoftEmulatorTests.tokens(base, http, hint: "AdeleV@contoso.example", scope: "openid Calendars.Read")[
                    "access_token"] as? String)
            let events = try await http.execute(
                OutboundRequest(url: "\(base)/graph/v1.0/me/events?$top=1000&$skip=\(Int.max)", headers: ["Authorization": "Bearer \(graph)"]))
            #expect(events.status == 200, "\(events.status): \(events.bodyText)")
            #expect((try events.jsonObject()["value"] as? [Any])?.isEmpty == true)

            for status in [1000, 99, -1] {
                let fault = #"{"endpoint": "GET /github-api/user", "status": \#(status)}"#
                let refused = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/_emulator/faults", body: Array(fault.utf8)))
                #expect(refused.status == 400, "status \(status): \(refused.status)")
            }
            let endless = #"{"endpoint": "GET /github-api/user", "delayMs": \#(Int.max)}"#
            #expect(try await http.execute(OutboundRequest(method: "POST", url: "\(base)/_emulator/faults", body: Array(endless.utf8))).status == 400)
            #expect(try await http.execute(GitHubEmulatorTests.api("\(base)/github-api/user", token: github)).status == 200)
        }
    }
}
