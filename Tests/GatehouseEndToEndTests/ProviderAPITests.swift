import Crypto
import CurlClient
import Foundation
import GatehouseCore
import GatehouseTestSupport
import Testing

/// Issue #22: provider API passthrough under policy, paging, refresh and retry, consent, the
/// token vault — over real HTTP, real libcurl and the emulator's provider APIs.
@Suite("Provider API passthrough")
struct ProviderAPITests {
    /// A deployment whose gateway runs the demo's sample policy (`adjust` changes it).
    static func withAPIDeployment<T>(
        adjust: @escaping @Sendable (inout APIPolicy) -> Void = { _ in },
        configure: @escaping @Sendable (inout GatewayConfiguration) -> Void = { _ in }, _ body: (TestDeployment) async throws -> T
    ) async throws -> T {
        try await withDeployment(gateway: { configuration in
            let emulatorURL = String(configuration.github!.apiBaseURL.dropLast("/github-api".count))
            var policy = APIPolicy.sample(yahooBaseURL: "\(emulatorURL)/yahoo-fantasy")
            adjust(&policy)
            configuration.api = policy
            configure(&configuration)
        }) { try await body($0) }
    }

    /// The gateway's `gatehouse_provider_api_buffered_bytes`.
    static func bufferedBytes(_ deployment: TestDeployment) async throws -> Int? {
        let text = try await deployment.client.execute(OutboundRequest(url: deployment.operationsURL + "/metrics")).bodyText
        return text.split(separator: "\n").first { $0.hasPrefix("gatehouse_provider_api_buffered_bytes ") }
            .flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) }
    }

    /// The answer bytes buffered once they are all given back (bounded: 10 s), or what is still
    /// buffered then (`-1` when the gauge is missing). An answer's bytes are given back after
    /// its client has the whole body, so a caller that has its answer polls for this.
    static func bufferedBytesOnceDrained(_ deployment: TestDeployment) async throws -> Int {
        var left = -1
        for _ in 0..<400 where left != 0 {
            left = try await bufferedBytes(deployment) ?? -1
            if left != 0 { try await Task.sleep(for: .milliseconds(25)) }
        }
        return left
    }

    /// A service key holding `scopes`, straight into the deployment's store.
    static func key(_ deployment: TestDeployment, _ scopes: [String]) async throws -> String {
        let storage = try GatehouseSQLiteStorageForSpec.open(deployment.databasePath)
        return try await ServiceKeyService(storage: storage).create(name: "api", scopes: scopes).secret
    }

    /// A call with a service key, to a full URL (paging links) or a gateway path.
    static func call(
        _ deployment: TestDeployment, _ target: String, key: String, method: String = "GET", headers: OutboundHeaders = [:], body: [UInt8]? = nil,
        pathAsIs: Bool = false
    ) async throws -> OutboundResponse {
        var all = headers
        all.add("Authorization", "Bearer \(key)")
        var request = OutboundRequest(
            method: method, url: target.hasPrefix("http") ? target : deployment.gatewayURL + target, headers: all, body: body)
        request.pathAsIs = pathAsIs
        return try await deployment.client.execute(request)
    }

    /// Signs a browser in at `provider` as `login`, asking for `scope` on top of the defaults.
    static func signIn(_ browser: inout Browser, login: String, provider: String, scope: String = "", mode: String = "signin") async throws
        -> String
    {
        let returnTo = FormEncoding.escape(TestDeployment.returnTo)
        let hint = provider == "github.com" ? "login" : "login_hint"
        var query = "return_to=\(returnTo)&\(hint)=\(FormEncoding.escape(login))&mode=\(mode)"
        if !scope.isEmpty { query += "&scope=\(FormEncoding.escape(scope))" }
        let start = try await browser.start(query, provider: provider)
        let authorize = try #require(start.headers["location"], "\(start.status) \(start.bodyText)")
        let approved = try await browser.deployment.client.execute(OutboundRequest(url: authorize))
        let callback = try await browser.send(try #require(approved.headers["location"]))
        let location = try #require(callback.headers["location"], "\(callback.status) \(callback.bodyText)")
        let marker = try #require(location.range(of: "#gatehouse_result="))
        return try account(try await browser.result(String(location[marker.upperBound...]))).uid
    }

    /// The emulator's count of calls to `endpoint` (`GET /github-api/user/repos`).
    static func upstreamCalls(_ deployment: TestDeployment, _ endpoint: String) async throws -> Int {
        try await deployment.emulatorStats()[endpoint] ?? 0
    }

    /// The passthrough audit lines of the deployment's log.
    static func apiAuditLines(_ deployment: TestDeployment, event: String = "provider-api.called") -> [[String: Any]] {
        AuditTrailTests.auditLines(deployment.logs.lines).filter { $0["audit.event"] as? String == event }
    }

    @Test("GitHub: the repositories page by page through rewritten Link headers that carry no token; nothing hop-by-hop or cookie passes")
    func githubPaging() async throws {
        try await Self.withAPIDeployment { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(&browser, login: "octocat", provider: "github.com")
            let key = try await Self.key(deployment, ["api:github.com"])
            let base = "\(deployment.gatewayURL)/v1/users/\(uid)/providers/github.com/api"
            var url = "\(base)/user/repos?per_page=10"
            var names: [String] = []
            for page in 1...3 {
                let answer = try await Self.call(deployment, url, key: key)
                #expect(answer.status == 200, "\(answer.bodyText)")
                #expect(answer.headers["set-cookie"] == nil && answer.headers["content-security-policy"] == "default-src 'none'; sandbox")
                #expect(answer.headers["cross-origin-resource-policy"] == "same-origin")
                #expect(answer.headers["x-ratelimit-remaining"] != nil)
                let repos = try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [[String: Any]])
                #expect(repos.count == 10, "page \(page)")
                names += repos.compactMap { $0["name"] as? String }
                let link = try #require(answer.headers["link"], "page \(page)")
                #expect(!link.contains(deployment.emulatorURL) && !link.contains("github-api"), "\(link)")
                let tokens = await deployment.emulator.issuedAccessTokens()
                #expect(!tokens.contains(where: link.contains))
                let targets = link.split(separator: ",").map { String($0[$0.index(after: $0.firstIndex(of: "<")!)..<$0.firstIndex(of: ">")!]) }
                let holds = targets.allSatisfy { $0.hasPrefix("\(base)/user/repos?") }
                #expect(holds, "\(link)")
                guard let next = link.split(separator: ",").first(where: { $0.contains("rel=\"next\"") }) else {
                    #expect(page == 3, "the last page has no next link")
                    break
                }
                url = String(next[next.index(after: next.firstIndex(of: "<")!)..<next.firstIndex(of: ">")!])
            }
            // Without the `repo` scope GitHub lists the public repositories only: 30 of 45.
            #expect(names.count == 30 && Set(names).count == 30)
        }
    }

    @Test(
        "Graph: events page through @odata.nextLink moved under the gateway; the signed-in user's own route (a cookie change needs an allowed Origin); Yahoo's Fantasy games"
    )
    func graphPagingYahooAndSignedInUsers() async throws {
        try await Self.withAPIDeployment { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(&browser, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Calendars.Read")
            let key = try await Self.key(deployment, ["api:microsoft.com", "api:yahoo.com"])
            let base = "\(deployment.gatewayURL)/v1/users/\(uid)/providers/microsoft.com/api"
            var next: String? = "\(base)/v1.0/me/events?$top=10"
            var counts: [Int] = []
            while let url = next, counts.count < 5 {
                let answer = try await Self.call(deployment, url, key: key)
                #expect(answer.status == 200, "\(answer.bodyText)")
                let object = try jsonObject(answer)
                counts.append((object["value"] as? [Any])?.count ?? -1)
                next = object["@odata.nextLink"] as? String
                if let next { #expect(next.hasPrefix("\(base)/v1.0/me/events?"), "\(next)") }
            }
            #expect(counts == [10, 10, 5])

            // The same calls from the signed-in user's browser (the sample policy allows it).
            let own = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/microsoft.com/api/v1.0/me/events?$top=5")
            #expect(own.status == 200, "\(own.bodyText)")
            let ownNext = try #require(try jsonObject(own)["@odata.nextLink"] as? String)
            #expect(ownNext.hasPrefix("\(deployment.gatewayURL)/v1/me/providers/microsoft.com/api/v1.0/me/events?"))

            // A cookie change needs an allowed Origin, as on every cookie route; nothing goes upstream.
            let before = try await Self.upstreamCalls(deployment, "POST /github-api/user/repos")
            var github = Browser(deployment)
            _ = try await Self.signIn(&github, login: "octocat", provider: "github.com")
            for origin in [nil, "https://evil.example"] {
                github.origin = origin
                let forged = try await github.send(
                    "\(deployment.gatewayURL)/v1/me/providers/github.com/api/user/repos", method: "POST",
                    headers: ["Content-Type": "application/json"], body: Array(#"{"name": "x"}"#.utf8))
                try #expect(forged.status == 403 && (jsonObject(forged)["code"] as? String) == "origin-not-allowed", "\(origin ?? "none")")
            }
            #expect(try await Self.upstreamCalls(deployment, "POST /github-api/user/repos") == before)

            var yahooBrowser = Browser(deployment)
            let yahooUid = try await Self.signIn(&yahooBrowser, login: "sam@yahoo.example", provider: "yahoo.com")
            let games = try await Self.call(
                deployment, "/v1/users/\(yahooUid)/providers/yahoo.com/api/fantasy/v2/users;use_login=1/games?format=json", key: key)
            #expect(games.status == 200, "\(games.bodyText)")
            #expect(games.bodyText.contains("\"game_key\":\"423\""))
            let xml = try await Self.call(deployment, "/v1/users/\(yahooUid)/providers/yahoo.com/api/fantasy/v2/users;use_login=1/games", key: key)
            #expect(xml.status == 200 && xml.headers["content-type"]?.hasPrefix("application/xml") == true)
        }
    }

    @Test(
        "queries: an expansion is refused unless its template lists it, however it is spelled; a template's listed names are all it takes, and paging links naming others are dropped"
    )
    func queriesUnderPolicy() async throws {
        try await Self.withAPIDeployment(adjust: { policy in
            policy.providers["microsoft.com"]?.allow = [
                // The literals are well-formed: parsing them cannot fail.
                try! APITemplate("GET /v1.0/me/events", scopes: ["Calendars.Read"], query: .only(["top"])),
                try! APITemplate("GET /v1.0/me/messages", scopes: ["Mail.Read"], query: .only(["top", "skip"])),
                try! APITemplate("GET /v1.0/me/messages/{id}", scopes: ["Mail.Read"]),
            ]
        }) { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(
                &browser, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Calendars.Read Mail.Read")
            let key = try await Self.key(deployment, ["api:microsoft.com"])
            let api = "/v1/users/\(uid)/providers/microsoft.com/api/v1.0/me"
            let messages = try jsonObject(try await Self.call(deployment, "\(api)/messages?$top=5", key: key))
            let first = try #require((messages["value"] as? [[String: Any]])?.first?["id"] as? String)
            let message = try await Self.call(deployment, "\(api)/messages/\(first)?$select=subject", key: key)
            #expect(message.status == 200, "\(message.bodyText)")
            let before = try await deployment.emulatorStats()
            for query in [
                "$expand=attachments", "%24EXPAND=attachments", "expand=attachments", "$select=id;$expand=attachments",
                "$select=id&$ex%70and=microsoft.graph.eventMessage/event", "%20$expand=attachments", "$expand%20=attachments",
            ] {
                let answer = try await Self.call(deployment, "\(api)/messages/\(first)?\(query)", key: key)
                #expect(answer.status == 403, "\(query): \(answer.bodyText.prefix(200))")
                #expect(try jsonObject(answer)["code"] as? String == "path-not-allowed", "\(query)")
            }
            // A template listing its names takes those and no other.
            for target in ["\(api)/events?$top=5&$skip=5", "\(api)/events?$top=5&$filter=x", "\(api)/messages?$top=5&$select=body"] {
                let answer = try await Self.call(deployment, target, key: key)
                #expect(answer.status == 403, "\(target): \(answer.bodyText.prefix(200))")
            }
            #expect(try await deployment.emulatorStats() == before)
            let refused = Self.apiAuditLines(deployment).filter { $0["api.status"] as? Int == 403 }
            let notAllowed = refused.allSatisfy { $0["api.template"] as? String == "not-allowed" }
            #expect(refused.count == 10 && notAllowed)

            // Graph's next page names `$skip`: a link the events template would refuse is dropped,
            // the messages template's stays.
            let events = try jsonObject(try await Self.call(deployment, "\(api)/events?$top=5", key: key))
            #expect(events["@odata.nextLink"] is NSNull && (events["value"] as? [Any])?.count == 5, "\(events["@odata.nextLink"] ?? "none")")
            let next = try #require(messages["@odata.nextLink"] as? String)
            #expect(next == "\(deployment.gatewayURL)\(api)/messages?$top=5&$skip=5")
            #expect(try await Self.call(deployment, next, key: key).status == 200)
        }
    }

    @Test(
        "refused without any upstream call: a template outside the policy, dot segments (raw and encoded), an encoded slash, an absolute URL, a key without api:<provider>, a signed-in user where the operator did not allow it"
    )
    func refusalsCallNothing() async throws {
        try await Self.withAPIDeployment(adjust: { $0.providers["github.com"]?.signedInUsers = false }) { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(&browser, login: "octocat", provider: "github.com")
            let key = try await Self.key(deployment, ["api:github.com"])
            let before = try await deployment.emulatorStats()
            let api = "/v1/users/\(uid)/providers/github.com/api"
            for path in [
                "/user", "/user/emails", "/user/repos/../emails", "/user/%2E%2E/emails", "/user%2Frepos", "/https:/evil.example/user/repos",
                "/user//repos", "/user/repos%00",
            ] {
                let answer = try await Self.call(deployment, api + path, key: key, pathAsIs: true)
                #expect(answer.status == 403, "\(path): \(answer.bodyText)")
                #expect(try jsonObject(answer)["code"] as? String == "path-not-allowed", "\(path)")
            }
            let wrongKey = try await Self.key(deployment, ["api:microsoft.com", "profile:read"])
            let denied = try await Self.call(deployment, "\(api)/user/repos", key: wrongKey)
            try #expect(denied.status == 403 && (try jsonObject(denied)["code"] as? String) == "permission-denied")
            let own = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/github.com/api/user/repos")
            try #expect(own.status == 403 && (try jsonObject(own)["code"] as? String) == "path-not-allowed")
            let unknown = try await Self.call(
                deployment, "/v1/users/\(uid)/providers/oidc.emulator/api/userinfo", key: try await Self.key(deployment, ["api:oidc.emulator"]))
            #expect(unknown.status == 403, "\(unknown.bodyText)")
            // A provider id no provider has, as long as a request head allows.
            let nowhere = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/\(String(repeating: "x", count: 20_000))/api/user")
            #expect(nowhere.status == 404, "\(nowhere.bodyText.prefix(300))")
            // A uid no account has, as long, through a key's path.
            let nobody = try await Self.call(
                deployment, "/v1/users/\(String(repeating: "u", count: 20_000))/providers/github.com/api/user/repos", key: key)
            #expect(nobody.status == 404, "\(nobody.bodyText.prefix(300))")
            #expect(try await deployment.emulatorStats() == before)
            // Each refusal is audited once, as not allowed (never the raw path), and a provider
            // id none is configured with cut to 64 bytes.
            let audited = Self.apiAuditLines(deployment)
            #expect(audited.count == 12, "\(audited.count)")
            // The account's calls were not allowed; the call for no account was, and found none.
            let ownLines = audited.filter { $0["user.id"] as? String == uid }
            let holds = ownLines.allSatisfy { $0["api.template"] as? String == "not-allowed" && ($0["api.status"] as? Int ?? 0) >= 403 }
            #expect(ownLines.count == 11 && holds)
            let stranger = audited.filter { $0["user.id"] as? String != uid }.map { ($0["api.template"] as? String, $0["api.status"] as? Int) }
            #expect(stranger.count == 1 && stranger.first?.0 == "GET /user/repos" && stranger.first?.1 == 404, "\(stranger)")
            let providerIds = audited.compactMap { $0["provider.id"] as? String }
            let bounded = providerIds.allSatisfy { $0.utf8.count <= 64 }
            #expect(providerIds.count == 12 && bounded, "\(providerIds.map(\.utf8.count))")
            let uids = audited.compactMap { $0["user.id"] as? String }
            let boundedUIDs = uids.allSatisfy { $0.utf8.count <= 128 }
            #expect(uids.count == 12 && boundedUIDs, "\(uids.map(\.utf8.count))")
        }
    }

    @Test(
        "a Graph token the provider rejects is refreshed once and the call retried; GitHub's 429 answers 429 upstream-rate-limited with Retry-After")
    func refreshRetryAndRateLimits() async throws {
        try await Self.withAPIDeployment { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(&browser, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Mail.Read")
            let key = try await Self.key(deployment, ["api:microsoft.com", "api:github.com"])
            let messages = "/v1/users/\(uid)/providers/microsoft.com/api/v1.0/me/messages"
            #expect(try await Self.call(deployment, messages, key: key).status == 200)
            _ = try await deployment.control("microsoft/expire-tokens", "{}")
            let tokenCalls = try await deployment.emulatorStats().filter { $0.key.hasSuffix("/oauth2/v2.0/token") }.values.reduce(0, +)
            let retried = try await Self.call(deployment, messages, key: key)
            #expect(retried.status == 200, "\(retried.bodyText)")
            let holds = try await deployment.emulatorStats().filter { $0.key.hasSuffix("/oauth2/v2.0/token") }.values.reduce(0, +) == tokenCalls + 1
            #expect(holds)
            #expect(try await Self.upstreamCalls(deployment, "GET /graph/v1.0/me/messages") == 3)
            // One message through the `{id}` template.
            let first = try #require(((try jsonObject(retried)["value"] as? [[String: Any]])?.first?["id"]) as? String)
            let one = try await Self.call(deployment, "\(messages)/\(first)", key: key)
            try #expect(one.status == 200 && (try jsonObject(one)["id"] as? String) == first)

            var github = Browser(deployment)
            let octocat = try await Self.signIn(&github, login: "octocat", provider: "github.com")
            _ = try await deployment.control(
                "faults",
                #"{"endpoint": "GET /github-api/user/repos", "status": 429, "headers": {"Retry-After": "7", "X-RateLimit-Remaining": "0"}, "body": "{\"message\": \"slow down\"}", "times": 1}"#
            )
            // GitHub's limit is the gateway's 429 problem with GitHub's time to wait.
            let limited = try await Self.call(deployment, "/v1/users/\(octocat)/providers/github.com/api/user/repos", key: key)
            #expect(limited.status == 429)
            #expect(limited.headers["retry-after"] == "7")
            #expect(try jsonObject(limited)["code"] as? String == "upstream-rate-limited")
            let audited = Self.apiAuditLines(deployment)
            let holds2 = audited.map { $0["api.status"] as? Int } == [200, 200, 200, 429]
            #expect(holds2, "\(audited)")
            let holds3 = audited.map { $0["api.template"] as? String }.last == "GET /user/repos"
            #expect(holds3)
            let tokens = await deployment.emulator.issuedAccessTokens()
            let log = deployment.logs.lines.joined(separator: "\n")
            #expect(!tokens.contains(where: log.contains))
        }
    }

    @Test(
        "a GitHub limit of one resource (search) holds back only that resource's calls: the token's REST calls and its live profile still reach GitHub"
    )
    func githubLimitsPerResource() async throws {
        try await Self.withAPIDeployment { deployment in
            var github = Browser(deployment)
            let octocat = try await Self.signIn(&github, login: "octocat", provider: "github.com")
            let key = try await Self.key(deployment, ["api:github.com", "profile:read"])
            let reset = Int(deployment.clock.now().timeIntervalSince1970) + 120
            _ = try await deployment.control(
                "faults",
                #"{"endpoint": "GET /github-api/user/repos", "status": 403, "headers": {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "\#(reset)", "X-RateLimit-Resource": "search"}, "body": "{\"message\": \"API rate limit exceeded\"}", "times": 1}"#
            )
            let repos = "/v1/users/\(octocat)/providers/github.com/api/user/repos"
            let limited = try await Self.call(deployment, repos, key: key)
            #expect(limited.status == 429, "\(limited.bodyText)")
            #expect(try jsonObject(limited)["code"] as? String == "upstream-rate-limited")
            // The search budget is spent; the REST API's is not.
            let again = try await Self.call(deployment, repos, key: key)
            #expect(again.status == 200, "\(again.bodyText)")
            let profile = try await Self.call(deployment, "/v1/users/\(octocat)/providers/github.com/profile?refresh=true", key: key)
            #expect(profile.status == 200, "\(profile.bodyText)")
        }
    }

    @Test(
        "the answer budget: Graph answers read whole are held within GATEHOUSE_API_BUFFER_BYTES and a caller's share of it; a GET that would pass its caller's share answers 503 with Retry-After: 1, other callers are served, and the bytes are given back once written"
    )
    func answerBudget() async throws {
        try await Self.withAPIDeployment(
            adjust: { $0.providers["microsoft.com"]?.maxResponseBytes = 16 << 10 }, configure: { $0.apiBufferBytes = 64 << 10 }
        ) { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(&browser, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Mail.Read")
            let key = try await Self.key(deployment, ["api:microsoft.com"])
            let messages = "/v1/users/\(uid)/providers/microsoft.com/api/v1.0/me/messages?$top=12"
            let other = try await Self.key(deployment, ["api:microsoft.com"])
            let alone = try await Self.call(deployment, messages, key: key)
            // A caller's share of the 64 KiB is a quarter, one answer of the 16 KiB the policy
            // allows: one such answer fits it, half of one beside a whole one does not.
            #expect(alone.status == 200 && alone.body.count > 11 << 10 && alone.body.count < 16 << 10, "\(alone.status) \(alone.body.count)")
            #expect(try await Self.bufferedBytesOnceDrained(deployment) == 0)
            // The first half of the next answer arrives, the rest waits for the release.
            try await TrustTests.fault(deployment, ["endpoint": "GET /graph/v1.0/me/messages", "pauseBodyMs": 20_000, "times": 1])
            async let held = Self.call(deployment, messages, key: key)
            var holding = 0
            for _ in 0..<400 where holding == 0 {
                holding = try await Self.bufferedBytes(deployment) ?? 0
                if holding == 0 { try await Task.sleep(for: .milliseconds(25)) }
            }
            #expect(holding > 0 && holding < alone.body.count, "\(holding)")
            let refused = try await Self.call(deployment, messages, key: key)
            try #expect(refused.status == 503 && (try jsonObject(refused)["code"] as? String) == "upstream-unavailable", "\(refused.bodyText)")
            #expect(refused.headers["retry-after"] == "1")
            // Another caller's share is untouched: one reading slowly holds off no one else.
            let beside = try await Self.call(deployment, messages, key: other)
            #expect(beside.status == 200 && beside.body == alone.body, "\(beside.status)")
            _ = try await deployment.control("faults/release", "{}")
            let answered = try await held
            #expect(answered.status == 200 && answered.body == alone.body)
            #expect(try await Self.bufferedBytesOnceDrained(deployment) == 0)
            #expect(try await Self.call(deployment, messages, key: key).status == 200)
        }
    }

    @Test(
        "a call that refused a token right after its refresh is not refreshed again for a minute: a key calling an endpoint that answers 401 for another reason cannot rotate the user's tokens in a loop; other calls still refresh"
    )
    func refusedAfterRefreshCoolsDown() async throws {
        try await Self.withAPIDeployment { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(
                &browser, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Mail.Read Calendars.Read")
            let key = try await Self.key(deployment, ["api:microsoft.com"])
            let messages = "/v1/users/\(uid)/providers/microsoft.com/api/v1.0/me/messages"
            func tokenCalls() async throws -> Int {
                try await deployment.emulatorStats().filter { $0.key.hasSuffix("/oauth2/v2.0/token") }.values.reduce(0, +)
            }
            let before = try await tokenCalls()
            try await TrustTests.fault(
                deployment,
                ["endpoint": "GET /graph/v1.0/me/messages", "status": 401, "body": #"{"error": {"code": "InvalidAuthenticationToken"}}"#, "times": 6])
            // The first refusal refreshes once and retries once; the retry's refusal is the caller's.
            for _ in 0..<3 {
                let refused = try await Self.call(deployment, messages, key: key)
                try #expect(
                    refused.status == 409 && (try jsonObject(refused)["code"] as? String) == "provider-reauth-required", "\(refused.bodyText)")
            }
            #expect(try await tokenCalls() == before + 1)
            #expect(try await Self.upstreamCalls(deployment, "GET /graph/v1.0/me/messages") == 4)
            // Only that call is held back: the grant's tokens revoked meanwhile are refreshed for another.
            _ = try await deployment.control("microsoft/expire-tokens", "{}")
            #expect(try await Self.call(deployment, "/v1/users/\(uid)/providers/microsoft.com/api/v1.0/me/events", key: key).status == 200)
            #expect(try await tokenCalls() == before + 2)
            // A minute on, a refusal refreshes again, and the grant still serves once the provider takes it.
            deployment.clock.advance(by: 61)
            #expect(try await Self.call(deployment, messages, key: key).status == 409)
            #expect(try await tokenCalls() == before + 3)
            #expect(try await Self.call(deployment, messages, key: key).status == 200)
            #expect(try await tokenCalls() == before + 3)
            let metrics = try await deployment.client.execute(OutboundRequest(url: deployment.operationsURL + "/metrics")).bodyText
            let heldBack = metrics.split(separator: "\n").first {
                $0.hasPrefix("gatehouse_token_refreshes_total{") && $0.contains(#"outcome="held-back""#) && $0.contains(#"provider="microsoft.com""#)
            }
            #expect(heldBack?.hasSuffix(" 2") == true, "\(heldBack ?? "none")")
        }
    }

    @Test(
        "consent: Graph refuses a call for lack of a permission → 403 insufficient-provider-scope naming it; reauthenticate with the scope, the same call → 200; GitHub names its accepted scopes"
    )
    func insufficientScopeThenIncrementalConsent() async throws {
        try await Self.withAPIDeployment { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(&browser, login: "AdeleV@contoso.example", provider: "microsoft.com")
            let key = try await Self.key(deployment, ["api:microsoft.com", "api:github.com"])
            let events = "/v1/users/\(uid)/providers/microsoft.com/api/v1.0/me/events"
            let refused = try await Self.call(deployment, events, key: key)
            #expect(refused.status == 403)
            let problem = try jsonObject(refused)
            #expect(problem["code"] as? String == "insufficient-provider-scope")
            #expect(problem["missingScopes"] as? String == "Calendars.Read")
            /// The scopes `GET /v1/me` lists for the Microsoft link.
            func listedScopes() async throws -> [String] {
                let me = try jsonObject(try await browser.send("\(deployment.gatewayURL)/v1/me"))
                return ((me["providers"] as? [[String: Any]])?.first?["scopes"] as? [String]) ?? []
            }
            #expect(try await listedScopes().contains("User.Read"))
            #expect(try await !listedScopes().contains("Calendars.Read"))
            _ = try await Self.signIn(
                &browser, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Calendars.Read", mode: "reauthenticate")
            #expect(try await listedScopes().contains("Calendars.Read"))
            #expect(try await Self.call(deployment, events, key: key).status == 200)

            var github = Browser(deployment)
            let octocat = try await Self.signIn(&github, login: "octocat", provider: "github.com")
            let create = try await Self.call(
                deployment, "/v1/users/\(octocat)/providers/github.com/api/user/repos", key: key, method: "POST",
                headers: ["Content-Type": "application/json"], body: Array(#"{"name": "hello"}"#.utf8))
            #expect(create.status == 403, "\(create.bodyText)")
            #expect(try jsonObject(create)["missingScopes"] as? String == "public_repo repo")
            _ = try await Self.signIn(&github, login: "octocat", provider: "github.com", scope: "public_repo", mode: "reauthenticate")
            let created = try await Self.call(
                deployment, "/v1/users/\(octocat)/providers/github.com/api/user/repos", key: key, method: "POST",
                headers: ["Content-Type": "application/json"], body: Array(#"{"name": "hello"}"#.utf8))
            #expect(created.status == 201, "\(created.bodyText)")
            #expect(try jsonObject(created)["full_name"] as? String == "octocat/hello")
            let audited = Self.apiAuditLines(deployment).map { ($0["api.template"] as? String ?? "", $0["api.status"] as? Int ?? 0) }
            #expect(audited.map(\.1) == [403, 200, 403, 201])
            #expect(audited.map(\.0) == ["GET /v1.0/me/events", "GET /v1.0/me/events", "POST /user/repos", "POST /user/repos"])

            // A 403 for another reason is the provider's answer, passed on with its body.
            _ = try await deployment.control(
                "faults",
                #"{"endpoint": "GET /graph/v1.0/me/events", "status": 403, "body": "{\"error\": {\"code\": \"ErrorQuotaExceeded\", \"message\": \"quota\"}}", "times": 1}"#
            )
            let other = try await Self.call(deployment, events, key: key)
            #expect(other.status == 403 && other.bodyText.contains("ErrorQuotaExceeded"), "\(other.bodyText)")
        }
    }

    @Test("caps: a request body over the policy's cap is refused with 413 before any upstream call; an answer over the cap is not passed on")
    func bodyCaps() async throws {
        try await Self.withAPIDeployment(adjust: {
            $0.providers["github.com"]?.maxRequestBytes = 1024
            // A full repository object is about 5 KB: one fits, the fault's 100 KB does not.
            $0.providers["github.com"]?.maxResponseBytes = 16 << 10
        }) { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(&browser, login: "octocat", provider: "github.com", scope: "repo")
            let key = try await Self.key(deployment, ["api:github.com"])
            let repos = "/v1/users/\(uid)/providers/github.com/api/user/repos"
            let large = try await Self.call(
                deployment, repos, key: key, method: "POST", headers: ["Content-Type": "application/json"],
                body: Array(("{\"name\": \"" + String(repeating: "x", count: 2000) + "\"}").utf8))
            #expect(large.status == 413, "\(large.bodyText)")
            #expect(try await Self.upstreamCalls(deployment, "POST /github-api/user/repos") == 0)
            _ = try await deployment.control(
                "faults", #"{"endpoint": "GET /github-api/user/repos", "status": 200, "bodyBytes": 100000, "times": 1}"#)
            let oversized = try await Self.call(deployment, repos, key: key)
            #expect(oversized.status == 502, "\(oversized.status)")
            #expect(try await Self.call(deployment, repos + "?per_page=1", key: key).status == 200)
        }
    }

    @Test(
        "framing: an answer of up to 64 KB goes out whole with its Content-Length; one that cannot have arrived whole when its head did (1 MB; a small one still coming) streams chunked, whole, its head not held back"
    )
    func answerFraming() async throws {
        // GitHub's passthrough calls may take two minutes: the held answer below ends when the
        // test releases it, long before that, however loaded the machine.
        try await Self.withAPIDeployment(adjust: { $0.providers["github.com"]?.timeout = .seconds(120) }) { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(&browser, login: "octocat", provider: "github.com", scope: "repo")
            let key = try await Self.key(deployment, ["api:github.com"])
            let repos = "/v1/users/\(uid)/providers/github.com/api/user/repos"
            // One repository: about 5 KB (the whole list is about 150 KB).
            let small = try await Self.call(deployment, repos + "?per_page=1", key: key)
            #expect(small.status == 200 && !small.body.isEmpty && small.body.count < 64 << 10, "\(small.status) \(small.body.count)")
            #expect(small.headers["content-length"] == String(small.body.count))
            #expect(small.headers["transfer-encoding"] == nil)
            // 1 MB: libcurl pauses the transfer once 256 KB wait unread, so it streams.
            _ = try await deployment.control(
                "faults", #"{"endpoint": "GET /github-api/user/repos", "status": 200, "bodyBytes": 1000000, "times": 1}"#)
            let large = try await Self.call(deployment, repos, key: key)
            #expect(large.status == 200 && large.body.count == 1_000_000, "\(large.status) \(large.body.count)")
            #expect(large.headers["transfer-encoding"] == "chunked")
            #expect(large.headers["content-length"] == nil)

            // A small answer of unknown length still coming is not waited for: its head and first
            // half pass while GitHub holds the rest until released. A gateway that waited for the
            // whole answer would send its head only when the call timed out: a 504, not this 200.
            _ = try await deployment.control(
                "faults", #"{"endpoint": "GET /github-api/user/repos", "pauseBodyMs": 3600000, "chunked": true, "times": 1}"#)
            var request = OutboundRequest(url: deployment.gatewayURL + repos + "?per_page=1", headers: ["Authorization": "Bearer \(key)"])
            request.timeout = .seconds(300)
            let held = try await deployment.client.stream(request)
            var chunks = held.body.makeAsyncIterator()
            var bytes = try #require(try await chunks.next())
            #expect(held.head.status == 200 && held.head.headers["transfer-encoding"] == "chunked")
            _ = try await deployment.control("faults/release", "{}")
            while let chunk = try await chunks.next() { bytes += chunk }
            #expect(bytes == small.body)
        }
    }

    /// Bytes the emulated drive has received so far, over every upload.
    static func uploadedBytes(_ deployment: TestDeployment) async throws -> Int {
        let answer = try await deployment.client.execute(OutboundRequest(url: "\(deployment.emulatorURL)/_emulator/microsoft/uploaded-bytes"))
        return try #require(try jsonObject(answer)["receivedBytes"] as? Int)
    }

    /// A PUT of `chunks` to the drive item `item` through the passthrough, with the body
    /// streamed by the test's own libcurl client (`length` declared, or chunked when `nil`).
    static func upload(
        _ deployment: TestDeployment, uid: String, key: String, item: String, length: Int?, _ chunks: some AsyncSequence<[UInt8], Never> & Sendable
    ) async throws -> OutboundResponse {
        let url = "\(deployment.gatewayURL)/v1/users/\(uid)/providers/microsoft.com/api/v1.0/me/drive/items/\(item)/content"
        let headers: OutboundHeaders = ["Authorization": "Bearer \(key)", "Content-Type": "application/octet-stream"]
        return try await deployment.client.execute(
            OutboundRequest(method: "PUT", url: url, headers: headers, upload: OutboundUpload(length: length, chunks)))
    }

    /// `count` pseudo-random-looking bytes (different per `seed`).
    static func bytes(_ count: Int, seed: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 131 &+ seed &* 17) % 251) }
    }

    @Test("streamed bodies: a 4 MiB upload reaches Graph while the caller still sends it, whole; a chunked body over the cap is cut with 413")
    func streamedUpload() async throws {
        try await Self.withAPIDeployment(adjust: { $0.providers["microsoft.com"]?.maxRequestBytes = 5 << 20 }) { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(&browser, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Files.ReadWrite")
            let key = try await Self.key(deployment, ["api:microsoft.com"])
            let chunks = (1...16).map { Self.bytes(256 << 10, seed: $0) }
            let (source, producer) = AsyncStream.makeStream(of: [UInt8].self)
            async let answer = Self.upload(deployment, uid: uid, key: key, item: "01STREAM", length: 4 << 20, source)
            producer.yield(chunks[0])
            // A gateway that gathered the body first would pass nothing on before the end.
            var arrived = false
            for _ in 0..<500 where !arrived {
                arrived = try await Self.uploadedBytes(deployment) >= chunks[0].count
                if !arrived { try await Task.sleep(for: .milliseconds(20)) }
            }
            for chunk in chunks.dropFirst() { producer.yield(chunk) }
            producer.finish()
            let response = try await answer
            #expect(arrived, "the first 256 KiB never reached the provider before the caller finished sending")
            #expect(response.status == 200, "\(response.bodyText)")
            let item = try jsonObject(response)
            let all = chunks.flatMap { $0 }
            let digest = SHA256.hash(data: all).map { String(format: "%02X", $0) }.joined()
            #expect(item["size"] as? Int == all.count)
            #expect(((item["file"] as? [String: Any])?["hashes"] as? [String: Any])?["sha256Hash"] as? String == digest)

            // Over the cap without a declared length: refused as the 5 MiB pass, the upstream
            // transfer cut before the body's end (the provider never sees a whole request).
            let before = try await Self.uploadedBytes(deployment)
            let over = (1...24).map { Self.bytes(256 << 10, seed: $0) }
            let refused = try await Self.upload(deployment, uid: uid, key: key, item: "01OVER", length: nil, over.async)
            #expect(refused.status == 413, "\(refused.status) \(refused.bodyText)")
            #expect(try await Self.uploadedBytes(deployment) - before <= 5 << 20)
            // Declared over the cap: refused before any upstream call.
            let calls = try await Self.upstreamCalls(deployment, "PUT /graph/v1.0/me/drive/items/01DECLARED/content")
            let declared = try await Self.upload(deployment, uid: uid, key: key, item: "01DECLARED", length: 6 << 20, over.async)
            #expect(declared.status == 413)
            #expect(try await Self.upstreamCalls(deployment, "PUT /graph/v1.0/me/drive/items/01DECLARED/content") == calls)
            let audited = Self.apiAuditLines(deployment).map { ($0["api.template"] as? String ?? "", $0["api.status"] as? Int ?? 0) }
            #expect(audited.map(\.1) == [200, 413, 413], "\(audited)")
            let holds = audited.allSatisfy { $0.0 == "PUT /v1.0/me/drive/items/{id}/content" }
            #expect(holds)
        }
    }

    @Test(
        "streamed bodies and a refused token: a small body is sent again after the refresh; a large one answers 503 and goes through when sent again")
    func streamedUploadRetry() async throws {
        try await Self.withAPIDeployment(adjust: { $0.providers["microsoft.com"]?.maxRequestBytes = 4 << 20 }) { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(&browser, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Files.ReadWrite")
            let key = try await Self.key(deployment, ["api:microsoft.com"])
            // Small (kept for a second sending): the provider refuses the stored token, the
            // gateway refreshes it and sends the same bytes again.
            _ = try await deployment.control("microsoft/expire-tokens", "{}")
            let small = Self.bytes(1_000, seed: 9)
            let before = try await Self.uploadedBytes(deployment)
            let retried = try await Self.upload(deployment, uid: uid, key: key, item: "01SMALL", length: small.count, [small].async)
            #expect(retried.status == 200, "\(retried.bodyText)")
            #expect(try jsonObject(retried)["size"] as? Int == small.count)
            #expect(try await Self.uploadedBytes(deployment) - before == 2 * small.count)

            // Large (streamed once, not kept): 503, nothing done at the provider; sent again, 200.
            _ = try await deployment.control("microsoft/expire-tokens", "{}")
            let large = (1...8).map { Self.bytes(256 << 10, seed: $0) }
            let refused = try await Self.upload(deployment, uid: uid, key: key, item: "01LARGE", length: 2 << 20, large.async)
            #expect(refused.status == 503, "\(refused.bodyText)")
            let problem = try jsonObject(refused)
            #expect(problem["code"] as? String == "upstream-unavailable" && (problem["detail"] as? String)?.contains("Send the call again") == true)
            let again = try await Self.upload(deployment, uid: uid, key: key, item: "01LARGE", length: 2 << 20, large.async)
            #expect(again.status == 200, "\(again.bodyText)")
            #expect(try jsonObject(again)["size"] as? Int == 2 << 20)
        }
    }

    @Test("token vault: a fresh provider access token for a key with tokens:<provider> (refreshed when expired), audited; refused without the scope")
    func tokenVault() async throws {
        try await Self.withAPIDeployment { deployment in
            var browser = Browser(deployment)
            let uid = try await Self.signIn(&browser, login: "AdeleV@contoso.example", provider: "microsoft.com")
            let vault = try await Self.key(deployment, ["tokens:microsoft.com"])
            let apiOnly = try await Self.key(deployment, ["api:microsoft.com"])
            let route = "/v1/users/\(uid)/providers/microsoft.com/token"
            let denied = try await Self.call(deployment, route, key: apiOnly)
            try #expect(denied.status == 403 && (try jsonObject(denied)["code"] as? String) == "permission-denied")
            #expect(try await Self.call(deployment, "/v1/users/\(uid)/providers/github.com/token", key: vault).status == 403)

            let answer = try await Self.call(deployment, route, key: vault)
            #expect(answer.status == 200, "\(answer.bodyText)")
            #expect(answer.headers["cache-control"] == "private, no-store")
            let object = try jsonObject(answer)
            let token = try #require(object["accessToken"] as? String)
            #expect(object["tokenType"] as? String == "Bearer" && (object["expiresAt"] as? Int) != nil)
            #expect((object["scopes"] as? [String])?.contains("User.Read") == true)
            // The token works at the provider itself.
            let me = try await deployment.client.execute(
                OutboundRequest(url: "\(deployment.emulatorURL)/graph/v1.0/me", headers: ["Authorization": "Bearer \(token)"]))
            #expect(me.status == 200)
            // Expired at the provider and by the clock: the next answer is a refreshed token.
            _ = try await deployment.control("microsoft/expire-tokens", "{}")
            deployment.clock.advance(by: 7200)
            let fresh = try #require(try jsonObject(try await Self.call(deployment, route, key: vault))["accessToken"] as? String)
            #expect(fresh != token)
            let issued = Self.apiAuditLines(deployment, event: "provider-token.issued")
            let holds = issued.count == 2 && issued.allSatisfy { $0["user.id"] as? String == uid && $0["provider.id"] as? String == "microsoft.com" }
            #expect(holds)
            let log = deployment.logs.lines.joined(separator: "\n")
            #expect(!log.contains(token) && !log.contains(fresh))
        }
    }
}
