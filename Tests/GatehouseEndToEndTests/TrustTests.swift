import CurlClient
import Foundation
import GatehouseCore
import GatehouseTestSupport
import Testing

/// Trust in the newer surfaces: no caller switches a provider's API off for the others, answers
/// about one user are never cacheable for another, unlinked providers stop answering at once,
/// paging links cannot point anywhere else, request ids cannot be borrowed, GitHub's secondary
/// rate limits are limits, and an unknown Microsoft tenant is the caller's mistake — over real
/// HTTP, real libcurl and the emulator.
@Suite("Trust in the newer surfaces")
struct TrustTests {
    /// A deployment with the demo's API policy, `adjust` applied to it.
    static func withPolicyDeployment<T>(
        instances: Int = 1, profileCacheLifetime: TimeInterval = 0,
        adjust: @escaping @Sendable (inout APIPolicy) -> Void = { _ in }, _ body: (TestDeployment) async throws -> T
    ) async throws -> T {
        try await withDeployment(
            profileCacheLifetime: profileCacheLifetime,
            gateway: { configuration in
                let emulatorURL = String(configuration.github!.apiBaseURL.dropLast("/github-api".count))
                var policy = APIPolicy.sample(yahooBaseURL: "\(emulatorURL)/yahoo-fantasy")
                adjust(&policy)
                configuration.api = policy
            }, instances: instances
        ) { try await body($0) }
    }

    /// A fault on the emulator, written as JSON from an object.
    static func fault(_ deployment: TestDeployment, _ object: [String: Any]) async throws {
        let data = try JSONSerialization.data(withJSONObject: object)
        let answer = try await deployment.control("faults", String(decoding: data, as: UTF8.self))
        #expect(answer.status == 201, "\(answer.bodyText)")
    }

    /// The problem code of an answer.
    static func code(_ answer: OutboundResponse) -> String? {
        (try? jsonObject(answer))?["code"] as? String
    }

    // MARK: 1. The passthrough's host breaker

    @Test(
        "no single caller opens a provider's API breaker for everyone: five stalled uploads (408) and five answers over the cap (502) from one key leave another user's call answered; one caller's five 503s do not open it, two callers' do"
    )
    func oneCallerCannotOpenTheBreaker() async throws {
        // A short timeout for Graph API calls alone: sign-ins keep the tests' generous one.
        try await Self.withPolicyDeployment(adjust: {
            // One event (about 1.5 KB) fits, the fault's 100 KB does not.
            $0.providers["microsoft.com"]?.maxResponseBytes = 4096
            // Long enough for Bob's calls on a loaded run, far shorter than the stalls below.
            $0.providers["microsoft.com"]?.timeout = .seconds(15)
        }) {
            deployment in
            var adele = Browser(deployment)
            let adeleUid = try await ProviderAPITests.signIn(
                &adele, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Files.ReadWrite Calendars.Read")
            var bob = Browser(deployment)
            _ = try await ProviderAPITests.signIn(&bob, login: "BobK@fabrikam.example", provider: "microsoft.com", scope: "Calendars.Read")
            let key = try await ProviderAPITests.key(deployment, ["api:microsoft.com"])
            let bobsEvents = "\(deployment.gatewayURL)/v1/me/providers/microsoft.com/api/v1.0/me/events?$top=1"

            // Uploads that declare 1,000 bytes and send 10: the caller's body is late, not Graph.
            let stalled = try await withThrowingTaskGroup(of: OutboundResponse.self) { group in
                for index in 0..<5 {
                    group.addTask {
                        let (source, producer) = AsyncStream.makeStream(of: [UInt8].self)
                        producer.yield(Array(repeating: 7, count: 10))
                        let stop = Task {
                            try? await Task.sleep(for: .seconds(300))
                            producer.finish()
                        }
                        defer { stop.cancel() }
                        return try await ProviderAPITests.upload(deployment, uid: adeleUid, key: key, item: "01STALL\(index)", length: 1000, source)
                    }
                }
                var answers: [OutboundResponse] = []
                for try await answer in group { answers.append(answer) }
                return answers
            }
            for answer in stalled {
                #expect(answer.status == 408, "\(answer.status) \(answer.bodyText)")
                #expect(Self.code(answer) == "invalid-argument")
            }
            let afterStalls = try await bob.send(bobsEvents)
            #expect(afterStalls.status == 200, "\(afterStalls.status) \(afterStalls.bodyText)")

            // Answers over the cap: what the caller asked for, five times.
            try await Self.fault(deployment, ["endpoint": "GET /graph/v1.0/me/events", "status": 200, "bodyBytes": 100_000, "times": 5])
            for _ in 0..<5 {
                let oversized = try await ProviderAPITests.call(
                    deployment, "/v1/users/\(adeleUid)/providers/microsoft.com/api/v1.0/me/events", key: key)
                #expect(oversized.status == 502, "\(oversized.status) \(oversized.bodyText)")
            }
            let afterOversized = try await bob.send(bobsEvents)
            #expect(afterOversized.status == 200, "\(afterOversized.status) \(afterOversized.bodyText)")

            // Five 503s met by one caller alone do not open it either.
            try await Self.fault(deployment, ["endpoint": "GET /graph/v1.0/me/events", "status": 503, "body": "{}", "times": 6])
            for _ in 0..<6 {
                let failed = try await ProviderAPITests.call(deployment, "/v1/users/\(adeleUid)/providers/microsoft.com/api/v1.0/me/events", key: key)
                #expect(failed.status == 503 && failed.bodyText == "{}", "\(failed.status) \(failed.bodyText)")
            }
            let afterOneCaller = try await bob.send(bobsEvents)
            #expect(afterOneCaller.status == 200, "\(afterOneCaller.status) \(afterOneCaller.bodyText)")

            // A provider that really fails (for two callers) still opens it.
            try await Self.fault(deployment, ["endpoint": "GET /graph/v1.0/me/events", "status": 503, "body": "{}"])
            for _ in 0..<3 {
                _ = try await ProviderAPITests.call(deployment, "/v1/users/\(adeleUid)/providers/microsoft.com/api/v1.0/me/events", key: key)
                _ = try await bob.send(bobsEvents)
            }
            let before = try await ProviderAPITests.upstreamCalls(deployment, "GET /graph/v1.0/me/events")
            let refused = try await bob.send(bobsEvents)
            #expect(refused.status == 503)
            #expect(Self.code(refused) == "upstream-unavailable" && refused.bodyText.contains("has been failing"), "\(refused.bodyText)")
            // The host's address is the operator's: in the log, not in the answer.
            #expect(!refused.bodyText.contains(deployment.emulatorURL), "\(refused.bodyText)")
            let logged = deployment.logs.lines.contains { $0.contains("refused by its breaker") && $0.contains(deployment.emulatorURL) }
            #expect(logged)
            // Told when the breaker lets a probe through: within its open period of 30 s.
            let retryAfter = refused.headers["retry-after"].flatMap { Int($0) } ?? 0
            #expect((1...30).contains(retryAfter), "\(refused.headers)")
            #expect(try await ProviderAPITests.upstreamCalls(deployment, "GET /graph/v1.0/me/events") == before)
        }
    }

    @Test(
        "a token endpoint that fails is not the API host failing: refreshes that meet 503s for two users open the provider's breaker, which then spares the token endpoint, and leave a third user's call, whose token is valid, answered"
    )
    func failedRefreshesLeaveTheAPIHostsBreakerClosed() async throws {
        try await Self.withPolicyDeployment { deployment in
            var adele = Browser(deployment)
            let adeleUid = try await ProviderAPITests.signIn(
                &adele, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Calendars.Read")
            var bob = Browser(deployment)
            _ = try await ProviderAPITests.signIn(&bob, login: "BobK@fabrikam.example", provider: "microsoft.com", scope: "Calendars.Read")
            let key = try await ProviderAPITests.key(deployment, ["api:microsoft.com"])
            // Graph refuses Adele's and Bob's access tokens from now on; Steven signs in after.
            _ = try await deployment.control("microsoft/expire-tokens", "{}")
            var steven = Browser(deployment)
            _ = try await ProviderAPITests.signIn(&steven, login: "steven@outlook.example", provider: "microsoft.com", scope: "Calendars.Read")
            // Every refresh meets a 503 at the token endpoint, which Graph's host is not.
            let tokenEndpoints = try await deployment.emulatorStats().keys.filter { $0.hasSuffix("/oauth2/v2.0/token") }
            #expect(!tokenEndpoints.isEmpty)
            for endpoint in tokenEndpoints {
                try await Self.fault(deployment, ["endpoint": endpoint, "status": 503, "body": "{}"])
            }
            let myEvents = "\(deployment.gatewayURL)/v1/me/providers/microsoft.com/api/v1.0/me/events?$top=1"
            let refreshes = { try await deployment.emulatorStats().filter { tokenEndpoints.contains($0.key) }.values.reduce(0, +) }
            let refreshesBefore = try await refreshes()
            for _ in 0..<4 {
                let adeles = try await ProviderAPITests.call(deployment, "/v1/users/\(adeleUid)/providers/microsoft.com/api/v1.0/me/events", key: key)
                #expect(adeles.status == 503, "\(adeles.status) \(adeles.bodyText)")
                let bobs = try await bob.send(myEvents)
                #expect(bobs.status == 503, "\(bobs.status) \(bobs.bodyText)")
            }
            // The provider's breaker counts the refreshes: open after five failures of the two
            // users, it sends the last three calls' refreshes nowhere.
            let refreshed = try await refreshes() - refreshesBefore
            #expect(refreshed == 5)
            // Graph itself answered every call it was sent (a 401 for each stale token).
            let stevens = try await steven.send(myEvents)
            #expect(stevens.status == 200, "\(stevens.status) \(stevens.bodyText)")
        }
    }

    // MARK: 2. Caching headers

    @Test(
        "answers about a user are Cache-Control: private with Vary: Cookie, Authorization; a provider's public caching advice, Expires and Vary never pass, its ETag does"
    )
    func perUserAnswersArePrivate() async throws {
        try await Self.withPolicyDeployment { deployment in
            // Adele has a photo at Graph.
            var bob = Browser(deployment)
            let uid = try await ProviderAPITests.signIn(&bob, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Calendars.Read")
            try await Self.fault(
                deployment,
                [
                    "endpoint": "GET /graph/v1.0/me/events", "status": 200, "body": #"{"value": []}"#, "times": 2,
                    "headers": [
                        "Content-Type": "application/json", "Cache-Control": "public, max-age=86400, s-maxage=86400", "Vary": "Accept",
                        "Expires": "Thu, 01 Dec 2099 16:00:00 GMT", "ETag": "\"events-1\"",
                    ],
                ])
            let key = try await ProviderAPITests.key(deployment, ["api:microsoft.com", "profile:read"])
            for answer in [
                try await bob.send("\(deployment.gatewayURL)/v1/me/providers/microsoft.com/api/v1.0/me/events"),
                try await ProviderAPITests.call(deployment, "/v1/users/\(uid)/providers/microsoft.com/api/v1.0/me/events", key: key),
            ] {
                #expect(answer.status == 200, "\(answer.bodyText)")
                #expect(answer.headers["cache-control"] == "private, no-store")
                #expect(answer.headers.values("cache-control").count == 1)
                // The gateway's own, and no other: the provider's `Vary: Accept` does not pass.
                let varies = answer.headers.values("vary").sorted()
                #expect(varies == ["Cookie, Authorization", "Origin"], "\(varies)")
                #expect(answer.headers["expires"] == nil)
                #expect(answer.headers["etag"] == "\"events-1\"")
            }
            for path in ["/v1/me", "/v1/me/providers/microsoft.com/profile", "//v1/me", "/v1//me/providers/microsoft.com/profile"] {
                var request = OutboundRequest(url: deployment.gatewayURL + path, headers: bob.jar.header)
                request.pathAsIs = true
                let answer = try await deployment.client.execute(request)
                #expect(answer.status == 200, "\(path): \(answer.bodyText)")
                #expect(answer.headers["cache-control"] == "private, no-store", "\(path)")
                #expect(answer.headers.values("vary").contains("Cookie, Authorization"), "\(path)")
            }
            for path in ["/v1/users/\(uid)", "/v1/users/\(uid)/providers/microsoft.com/profile"] {
                let answer = try await ProviderAPITests.call(deployment, path, key: key)
                #expect(answer.status == 200, "\(path): \(answer.bodyText)")
                #expect(answer.headers["cache-control"] == "private, no-store", "\(path)")
                #expect(answer.headers.values("vary").contains("Cookie, Authorization"), "\(path)")
            }
            let photo = try await bob.send("\(deployment.gatewayURL)/v1/me/photo")
            #expect(photo.status == 200)
            #expect(photo.headers["cache-control"] == "private, max-age=300")
            #expect(photo.headers.values("vary").contains("Cookie, Authorization"))
            // The public documents stay cacheable.
            let keys = try await deployment.client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/.well-known/jwks.json"))
            #expect(keys.headers["cache-control"]?.hasPrefix("public") == true)
        }
    }

    // MARK: 3. One server per SQLite data folder

    @Test("a second gatehouse demo on a data folder in use stops at start, naming the folder; one-shot commands still run beside it")
    func secondServerOnAFolderIsRefused() async throws {
        let executable = KeysCommandTests.executable.path
        try #require(FileManager.default.isExecutableFile(atPath: executable), "build the gatehouse product first (swift build)")
        try await DemoProcess.with(executable: executable) { demo in
            let second = try SpawnedProcess.start(
                executable, ["demo", "--port", "0", "--emulator-port", "0", "--data-dir", demo.folder], environment: nil, output: .pipe)
            // Read as it comes (a child writing into a full socket would wait for us), and
            // bounded: a second server that starts anyway is stopped and the test fails.
            let reading = Task { await second.output() }
            for _ in 0..<400 where second.isRunning { try await Task.sleep(for: .milliseconds(50)) }
            let running = second.isRunning
            if running { second.stop() }
            let output = await reading.value
            let status = await second.exited()
            #expect(!running, "the second demo started on a folder in use: \(output)")
            #expect(SpawnedProcess.exitCode(status) != 0, "\(output)")
            #expect(output.contains("The data folder \(demo.folder) is in use by another Gatehouse process (pid \(demo.process.pid))"), "\(output)")
            #expect(!output.contains("Gatehouse ready at"))
            // The first one still serves, and a one-shot command works beside it.
            let health = try await deployment(demo.url)
            #expect(health == 200)
            let listed = try await KeysCommandTests.run(["keys", "list", "--data-dir", demo.folder])
            #expect(listed.status == 0, "\(listed.output)")
        }
    }

    /// `GET /healthz` of a gateway at `url`.
    private func deployment(_ url: String) async throws -> Int {
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        return try await client.execute(OutboundRequest(url: url + "/healthz")).status
    }

    // MARK: 4. Unlinked providers

    @Test(
        "once a provider is unlinked, its live profile and photo are gone at once on the instance that unlinked it and, through the change feed, on the other (404), though both were cached for 60 s"
    )
    func unlinkDropsCachedProfileAndPhoto() async throws {
        // Several instances share a store on PostgreSQL, whose change feed tells each one what
        // another wrote (one SQLite folder serves one process).
        try await withDeployment(
            profileCacheLifetime: 60, gateway: { $0.photoProviderOrder = ["oidc.emulator"] }, database: try await PostgresTestServer.freshDatabase(),
            instances: 2
        ) {
            deployment in
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
            #expect(try await browser.complete(login: "olive@oidc.example", provider: "oidc.emulator", mode: "link").status == 200)
            let other = deployment.gatewayURLs[1]
            var reads: [String: OutboundResponse] = [:]
            for base in [deployment.gatewayURL, other] {
                for path in ["/v1/me/providers/oidc.emulator/profile", "/v1/me/photo?provider=oidc.emulator", "/v1/me/photo"] {
                    let answer = try await browser.send(base + path)
                    #expect(answer.status == 200, "\(base)\(path): \(answer.bodyText)")
                    reads[base + path] = answer
                }
            }
            let calls = try await deployment.emulatorStats()
            // Served from the cache now: no provider call.
            for base in [deployment.gatewayURL, other] {
                #expect(try await browser.send(base + "/v1/me/providers/oidc.emulator/profile").status == 200)
            }
            #expect(try await deployment.emulatorStats() == calls)

            let unlinked = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/oidc.emulator", method: "DELETE")
            #expect(unlinked.status == 200, "\(unlinked.bodyText)")
            // The other instance learns of the unlink through the change feed: it is asked until
            // its cached profile is gone (within the feed's bound), the unlinking one only once.
            let start = ContinuousClock.now
            while try await browser.send(other + "/v1/me/providers/oidc.emulator/profile").status == 200,
                ContinuousClock.now - start < MultiInstanceTests.feedBound
            {
                try await Task.sleep(for: .milliseconds(20))
            }
            for base in [deployment.gatewayURL, other] {
                let profile = try await browser.send(base + "/v1/me/providers/oidc.emulator/profile")
                #expect(profile.status == 404 && Self.code(profile) == "provider-not-linked", "\(base): \(profile.bodyText)")
                let photo = try await browser.send(base + "/v1/me/photo?provider=oidc.emulator")
                #expect(photo.status == 404 && Self.code(photo) == "provider-not-linked", "\(base): \(photo.status)")
                // The default photo now comes from GitHub, the one provider left.
                let fallback = try await browser.send(base + "/v1/me/photo")
                #expect(fallback.status == 200)
                #expect(fallback.body != reads[base + "/v1/me/photo"]?.body, "\(base): the unlinked provider's photo was served")
            }
        }
    }

    // MARK: 5 and 6. Paging links

    @Test(
        "paging links to another host are dropped, dot segments are not re-based under the gateway; Graph's @odata.nextLink is rewritten in one pass with a cap"
    )
    func pagingLinksCannotPointElsewhere() async throws {
        try await Self.withPolicyDeployment(adjust: { $0.providers["microsoft.com"]?.maxResponseBytes = 16 << 20 }) { deployment in
            var octocat = Browser(deployment)
            let uid = try await ProviderAPITests.signIn(&octocat, login: "octocat", provider: "github.com")
            let key = try await ProviderAPITests.key(deployment, ["api:github.com", "api:microsoft.com"])
            let upstream = "\(deployment.emulatorURL)/github-api"
            try await Self.fault(
                deployment,
                [
                    "endpoint": "GET /github-api/user/repos", "status": 200, "body": "[]", "times": 1,
                    "headers": [
                        "Content-Type": "application/json",
                        "Link":
                            #"<https://evil.example/steal?x=1>; rel="next", <\#(upstream)/../../../../v1/users/abc/providers/github.com/token>; rel="last", <\#(upstream)/user/%2E%2E/emails>; rel="first", <\#(upstream)/user/repos?page=2>; rel="prev""#,
                    ],
                ])
            let answer = try await ProviderAPITests.call(deployment, "/v1/users/\(uid)/providers/github.com/api/user/repos", key: key)
            #expect(answer.status == 200, "\(answer.bodyText)")
            let link = try #require(answer.headers["link"])
            #expect(link == #"<\#(deployment.gatewayURL)/v1/users/\#(uid)/providers/github.com/api/user/repos?page=2>; rel="prev""#, "\(link)")

            // Only other hosts' links: no Link header at all.
            try await Self.fault(
                deployment,
                [
                    "endpoint": "GET /github-api/user/repos", "status": 200, "body": "[]", "times": 1,
                    "headers": ["Content-Type": "application/json", "Link": #"<https://evil.example/steal?x=1>; rel="next""#],
                ])
            let bare = try await ProviderAPITests.call(deployment, "/v1/users/\(uid)/providers/github.com/api/user/repos", key: key)
            #expect(bare.status == 200 && bare.headers["link"] == nil, "\(bare.headers.values("link"))")

            // A hostile Graph page: 16,000 links, one to another host.
            var adele = Browser(deployment)
            let adeleUid = try await ProviderAPITests.signIn(
                &adele, login: "AdeleV@contoso.example", provider: "microsoft.com", scope: "Calendars.Read")
            let graph = "\(deployment.emulatorURL)/graph"
            let item = #"{"id": "e", "@odata.nextLink": "\#(graph)/v1.0/me/events?$skip=10"}, "#
            let body = #"{"@odata.deltaLink": "https://evil.example/delta", "value": ["# + String(repeating: item, count: 16_000) + "{}]}"
            try await Self.fault(
                deployment,
                ["endpoint": "GET /graph/v1.0/me/events", "status": 200, "body": body, "times": 1, "headers": ["Content-Type": "application/json"]])
            let page = try await ProviderAPITests.call(deployment, "/v1/users/\(adeleUid)/providers/microsoft.com/api/v1.0/me/events", key: key)
            #expect(page.status == 200, "\(page.status)")
            let object = try jsonObject(page)
            #expect(object["@odata.deltaLink"] is NSNull)
            let links = try #require(object["value"] as? [[String: Any]]).compactMap { $0["@odata.nextLink"] as? String }
            #expect(links.count == PagingLinks.maximumRewrites)
            let holds = links.allSatisfy { $0.hasPrefix("\(deployment.gatewayURL)/v1/users/\(adeleUid)/providers/microsoft.com/api/v1.0/me/events?") }
            #expect(holds)
            #expect(!page.bodyText.contains("evil.example") && !page.bodyText.contains(graph))
        }
    }

    // MARK: 9. GitHub's secondary rate limits

    @Test(
        "GitHub's secondary rate limit (403 or 429 with retry-after while requests remain) answers 429 upstream-rate-limited with Retry-After on the live profile, the passthrough and sign-in; the token waits without calling GitHub; no breaker opens, the grant stays"
    )
    func githubSecondaryRateLimits() async throws {
        try await Self.withPolicyDeployment { deployment in
            let limited: [String: Any] = [
                "endpoint": "GET /github-api/user", "status": 403, "times": 1,
                "headers": ["Content-Type": "application/json", "Retry-After": "3600", "X-RateLimit-Remaining": "4990"],
                "body": #"{"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}"#,
            ]
            // Sign-in's /user call.
            try await Self.fault(deployment, limited)
            var browser = Browser(deployment)
            let refusedSignIn = try await browser.complete(login: "octocat")
            #expect(refusedSignIn.status == 429, "\(refusedSignIn.status) \(refusedSignIn.bodyText)")
            #expect(Self.code(refusedSignIn) == "upstream-rate-limited")
            #expect(try await browser.complete(login: "octocat").status == 200)
            let uid = try account(try await browser.send("\(deployment.gatewayURL)/v1/me")).uid

            // The live profile: 429 with the provider's time, then held back without a call.
            try await Self.fault(deployment, limited)
            let profile = "\(deployment.gatewayURL)/v1/me/providers/github.com/profile?refresh=true"
            // The first answer carries GitHub's hour; the next ones what is left of it, which the
            // deployment's clock (the real one, under a loaded run) counts down.
            var left = 3600
            for attempt in 0..<6 {
                let calls = try await ProviderAPITests.upstreamCalls(deployment, "GET /github-api/user")
                let answer = try await browser.send(profile)
                #expect(answer.status == 429, "attempt \(attempt): \(answer.status) \(answer.bodyText)")
                #expect(Self.code(answer) == "upstream-rate-limited")
                let retryAfter = answer.headers["retry-after"].flatMap(Int.init) ?? 0
                #expect(attempt == 0 ? retryAfter == 3600 : (1...left).contains(retryAfter), "attempt \(attempt): \(retryAfter), before \(left)")
                left = max(1, retryAfter)
                #expect(try await ProviderAPITests.upstreamCalls(deployment, "GET /github-api/user") == calls + (attempt == 0 ? 1 : 0))
            }
            // After the wait GitHub is called again: the breaker never opened, the grant still works.
            deployment.clock.advance(by: 3601)
            let again = try await browser.send(profile)
            #expect(again.status == 200, "\(again.status) \(again.bodyText)")

            // The passthrough: a 429 with retry-after, and a 403 whose message names the limit.
            let key = try await ProviderAPITests.key(deployment, ["api:github.com"])
            let repos = "/v1/users/\(uid)/providers/github.com/api/user/repos"
            for fault: [String: Any] in [
                ["status": 429, "headers": ["Retry-After": "3600", "X-RateLimit-Remaining": "4000"], "body": "{}"],
                [
                    "status": 403, "headers": ["Content-Type": "application/json", "X-RateLimit-Remaining": "4000"],
                    "body": #"{"message": "You have exceeded a secondary rate limit."}"#,
                ],
            ] {
                try await Self.fault(deployment, fault.merging(["endpoint": "GET /github-api/user/repos", "times": 1]) { $1 })
                let answer = try await ProviderAPITests.call(deployment, repos, key: key)
                #expect(answer.status == 429 && Self.code(answer) == "upstream-rate-limited", "\(answer.status) \(answer.bodyText)")
                #expect(answer.headers["retry-after"] != nil)
                let calls = try await ProviderAPITests.upstreamCalls(deployment, "GET /github-api/user/repos")
                let held = try await ProviderAPITests.call(deployment, repos, key: key)
                #expect(held.status == 429, "\(held.bodyText)")
                #expect(try await ProviderAPITests.upstreamCalls(deployment, "GET /github-api/user/repos") == calls)
                deployment.clock.advance(by: 3601)
                #expect(try await ProviderAPITests.call(deployment, repos, key: key).status == 200)
            }
        }
    }

    // MARK: 10. Unknown tenants

    @Test("a Microsoft tenant that does not exist, named by the caller, is 400 invalid-argument saying so, not a 502")
    func unknownTenantIsTheCallersMistake() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let returnTo = FormEncoding.escape(TestDeployment.returnTo)
            let answer = try await browser.start("return_to=\(returnTo)&tenant=nosuchtenant.onmicrosoft.com", provider: "microsoft.com")
            #expect(answer.status == 400, "\(answer.status) \(answer.bodyText)")
            #expect(Self.code(answer) == "invalid-argument")
            #expect(answer.bodyText.contains("does not know the tenant"), "\(answer.bodyText)")
            // A known tenant still starts.
            let known = try await browser.start("return_to=\(returnTo)&tenant=contoso.example", provider: "microsoft.com")
            #expect(known.status == 302, "\(known.bodyText)")
        }
    }
}
