import CurlClient
import Foundation
import GatehouseCore
import GatehouseTestSupport
import Testing

/// The gateway's bound on calls to providers in flight (`GATEHOUSE_UPSTREAM_CALLS`), over real
/// HTTP, real libcurl and the emulator: slow providers cannot make it open sockets without end.
@Suite("Calls to providers beyond the gateway's limit")
struct UpstreamCallLimitTests {
    /// A deployment with the demo's API policy whose gateway holds `calls` calls out and as
    /// many waiting, `perUser` of one user's, `reserved` kept for `.high` calls (half of them
    /// for one provider's, as `serve` configures it), delivering
    /// `webhooks`, on `database` (SQLite when `nil`). GitHub's calls may take an hour: a call the
    /// emulator holds ends when the test releases it, however long a loaded machine takes to get there.
    static func withLimits(
        calls: Int, perUser: Int? = nil, reserved: Int = 0, webhooks: (@Sendable (_ emulatorURL: String) -> WebhookConfiguration)? = nil,
        database: String? = nil, _ body: (TestDeployment) async throws -> Void
    ) async throws {
        try await withDeployment(
            gateway: { configuration in
                let emulatorURL = String(configuration.github!.apiBaseURL.dropLast("/github-api".count))
                configuration.api = APIPolicy.sample(yahooBaseURL: "\(emulatorURL)/yahoo-fantasy")
                configuration.upstreamTimeouts["github.com"] = .seconds(3600)
            }, webhooks: webhooks, database: database, upstreamCalls: calls, upstreamCallsPerUser: perUser, upstreamCallsReserved: reserved, body)
    }

    /// Waits (bounded: 10 s) until the gateway's `/metrics` shows `name` at `value`.
    static func eventually(_ deployment: TestDeployment, _ name: String, is value: Double) async throws -> Bool {
        for _ in 0..<200 {
            if try await ResilienceTests.metric(deployment, name, [:]) == value { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Waits (bounded: 10 s) until GitHub's emulator has seen `count` calls to the repositories
    /// endpoint. The gateway counts a call in flight before libcurl sends it, so a call can be in
    /// flight and not yet held; one arriving after `faults/release` would be held for good.
    static func reposCallsArrived(_ deployment: TestDeployment, _ count: Int) async throws -> Bool {
        for _ in 0..<200 {
            if try await ProviderAPITests.upstreamCalls(deployment, "GET /github-api/user/repos") == count { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Two passthrough calls to `repos` held by GitHub (the unreserved slots of a limit of 3
    /// with 1 reserved) and three more waiting (their whole line); the five calls.
    static func fillUnreservedSlots(_ deployment: TestDeployment, _ repos: String, key: String) async throws -> [Task<OutboundResponse, any Error>] {
        _ = try await deployment.control("faults", #"{"endpoint": "GET /github-api/user/repos", "holdMs": 3600000, "times": 2}"#)
        let held = (0..<2).map { _ in Task { try await ProviderAPITests.call(deployment, repos, key: key) } }
        let bothHeld = try await Self.eventually(deployment, "gatehouse_upstream_calls_in_flight", is: 2)
        let bothArrived = try await Self.reposCallsArrived(deployment, 2)
        #expect(bothHeld && bothArrived)
        let waiting = (0..<3).map { _ in Task { try await ProviderAPITests.call(deployment, repos, key: key) } }
        let threeWait = try await Self.eventually(deployment, "gatehouse_upstream_calls_waiting", is: 3)
        #expect(threeWait)
        return held + waiting
    }

    /// Releases GitHub's held calls; every one of `calls` is then answered.
    static func release(_ deployment: TestDeployment, _ calls: [Task<OutboundResponse, any Error>]) async throws {
        _ = try await deployment.control("faults/release", "{}")
        for call in calls {
            let answer = try await call.value
            #expect(answer.status == 200, "\(answer.status) \(answer.bodyText)")
        }
    }

    @Test(
        "with 2 calls in flight and 2 waiting, a passthrough call is refused at once (503 upstream-unavailable, Retry-After: 1) and never sent; the waiting calls are answered once a slot frees, six refusals open no breaker, and a photo refused so is served once a slot frees"
    )
    func callsBeyondTheLimitAreRefused() async throws {
        try await Self.withLimits(calls: 2) { deployment in
            var browser = Browser(deployment)
            let uid = try await ProviderAPITests.signIn(&browser, login: "octocat", provider: "github.com")
            let key = try await ProviderAPITests.key(deployment, ["api:github.com"])
            let repos = "/v1/users/\(uid)/providers/github.com/api/user/repos?per_page=1"
            #expect(try await ResilienceTests.metric(deployment, "gatehouse_upstream_calls_limit", [:]) == 2)

            // The first two calls are held by GitHub until released; the next two wait for them.
            _ = try await deployment.control("faults", #"{"endpoint": "GET /github-api/user/repos", "holdMs": 3600000, "times": 2}"#)
            let held = (0..<2).map { _ in Task { try await ProviderAPITests.call(deployment, repos, key: key) } }
            let arrived = try await Self.reposCallsArrived(deployment, 2)
            #expect(arrived, "the two held calls reached GitHub")
            let waiting = (0..<2).map { _ in Task { try await ProviderAPITests.call(deployment, repos, key: key) } }
            let bothWait = try await Self.eventually(deployment, "gatehouse_upstream_calls_waiting", is: 2)
            #expect(bothWait)

            // Beyond those: refused at once, nothing sent to GitHub.
            for _ in 0..<6 {
                let refused = try await ProviderAPITests.call(deployment, repos, key: key)
                #expect(refused.status == 503, "\(refused.status) \(refused.bodyText)")
                #expect(TrustTests.code(refused) == "upstream-unavailable" && refused.bodyText.contains("too many calls"), "\(refused.bodyText)")
                #expect(refused.headers["retry-after"] == "1")
            }
            #expect(try await ProviderAPITests.upstreamCalls(deployment, "GET /github-api/user/repos") == 2)
            // The photo too: the gateway's refusal, not a failure of the avatar host to remember.
            let photo = "\(deployment.gatewayURL)/v1/me/photo"
            let refusedPhoto = try await browser.send(photo)
            #expect(refusedPhoto.status == 503 && TrustTests.code(refusedPhoto) == "upstream-unavailable", "\(refusedPhoto.bodyText)")
            #expect(try await deployment.emulatorStats()[PhotoStreamingTests.avatar] == nil)
            #expect(try await ResilienceTests.metric(deployment, "gatehouse_upstream_calls_refused_total", [:]) == 7)
            #expect(try await ResilienceTests.metric(deployment, "gatehouse_upstream_calls_in_flight", [:]) == 2)

            // Released: the held calls end, the waiting ones run, all answered.
            _ = try await deployment.control("faults/release", "{}")
            for call in held + waiting {
                let answer = try await call.value
                #expect(answer.status == 200, "\(answer.status) \(answer.bodyText)")
            }
            // Six refusals are more than the breaker's five failures: it did not count them.
            let after = try await ProviderAPITests.call(deployment, repos, key: key)
            #expect(after.status == 200, "\(after.status) \(after.bodyText)")
            let photoAfter = try await browser.send(photo)
            #expect(photoAfter.status == 200, "\(photoAfter.status) \(photoAfter.bodyText)")
            #expect(try await deployment.emulatorStats()[PhotoStreamingTests.avatar] == 1)
            #expect(try await ProviderAPITests.upstreamCalls(deployment, "GET /github-api/user/repos") == 5)
            let drained = try await Self.eventually(deployment, "gatehouse_upstream_calls_in_flight", is: 0)
            #expect(drained)
        }
    }

    @Test(
        "one user's passthrough calls beyond GATEHOUSE_UPSTREAM_CALLS_PER_USER are refused at once (429 rate-limited, Retry-After: 1), whoever makes them, while another user's go on"
    )
    func oneUserCannotTakeEverySlot() async throws {
        try await Self.withLimits(calls: 8, perUser: 2) { deployment in
            var octocat = Browser(deployment)
            let uid = try await ProviderAPITests.signIn(&octocat, login: "octocat", provider: "github.com")
            var pat = Browser(deployment)
            _ = try await ProviderAPITests.signIn(&pat, login: "private-pat", provider: "github.com")
            let key = try await ProviderAPITests.key(deployment, ["api:github.com"])
            let repos = "\(deployment.gatewayURL)/v1/me/providers/github.com/api/user/repos?per_page=1"

            // Two calls for octocat held by GitHub: his whole share.
            _ = try await deployment.control("faults", #"{"endpoint": "GET /github-api/user/repos", "holdMs": 3600000, "times": 2}"#)
            let his = "/v1/users/\(uid)/providers/github.com/api/user/repos?per_page=1"
            let held = (0..<2).map { _ in Task { try await ProviderAPITests.call(deployment, his, key: key) } }
            let bothHeld = try await Self.eventually(deployment, "gatehouse_upstream_calls_in_flight", is: 2)
            let bothArrived = try await Self.reposCallsArrived(deployment, 2)
            #expect(bothHeld && bothArrived)
            // A third, from his browser or from a service acting for him, is refused unsent.
            let own = try await octocat.send(repos)
            let forHim = try await ProviderAPITests.call(deployment, his, key: key)
            for refused in [own, forHim] {
                #expect(refused.status == 429, "\(refused.status) \(refused.bodyText)")
                #expect(TrustTests.code(refused) == "rate-limited" && refused.bodyText.contains("this user's calls"), "\(refused.bodyText)")
                #expect(refused.headers["retry-after"] == "1")
            }
            #expect(try await ProviderAPITests.upstreamCalls(deployment, "GET /github-api/user/repos") == 2)
            // Another user's call is not his to refuse.
            let pats = try await pat.send(repos)
            #expect(pats.status == 200, "\(pats.status) \(pats.bodyText)")

            _ = try await deployment.control("faults/release", "{}")
            for call in held {
                let answer = try await call.value
                #expect(answer.status == 200, "\(answer.status) \(answer.bodyText)")
            }
            let after = try await octocat.send(repos)
            #expect(after.status == 200, "\(after.status) \(after.bodyText)")
        }
    }

    @Test(
        "a provider whose token endpoint hangs holds half of the slots at most: its next sign-in is refused at once (upstream-unavailable) and never sent, while another provider's sign-in completes"
    )
    func oneProviderCannotTakeEverySlot() async throws {
        // The gateway's client as `serve` configures it: half of 4 for one provider.
        try await Self.withLimits(calls: 4) { deployment in
            // GitHub's token endpoint holds two code exchanges: half of the slots.
            let exchange = "POST /github/login/oauth/access_token"
            _ = try await deployment.control("faults", #"{"endpoint": "\#(exchange)", "holdMs": 3600000, "times": 2}"#)
            let held = ["octocat", "private-pat"].map { login in
                Task {
                    var browser = Browser(deployment)
                    return try await browser.signIn(login: login)
                }
            }
            // Both at the emulator, not only counted in flight: an exchange arriving after the
            // release below would be held for good.
            var arrived = false
            for _ in 0..<200 where !arrived {
                arrived = try await deployment.emulatorStats()[exchange] == 2
                if !arrived { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(arrived, "the two held code exchanges reached GitHub")
            let bothHeld = try await Self.eventually(deployment, "gatehouse_upstream_calls_in_flight", is: 2)
            #expect(bothHeld)
            // A third GitHub sign-in is refused at once, with two slots free, and never sent.
            var refused = Browser(deployment)
            let refusedResult = try await refused.result(try await refused.signIn(login: "octocat"))
            #expect(refusedResult.status == 503, "\(refusedResult.status) \(refusedResult.bodyText)")
            #expect(TrustTests.code(refusedResult) == "upstream-unavailable", "\(refusedResult.bodyText)")
            #expect(try await deployment.emulatorStats()[exchange] == 2)
            // Another provider's sign-in (discovery, keys, code exchange, userinfo) completes.
            let openID = Task {
                var browser = Browser(deployment)
                return (try? await OIDCSignInTests.signIn(&browser, login: "olive@oidc.example", provider: "oidc.emulator").status) ?? 0
            }
            let completed = await Deadline.answer(within: .seconds(60)) { await openID.value }
            #expect(completed == 200, "the OpenID sign-in did not complete beside GitHub's held exchanges")

            // Released, the held sign-ins complete.
            _ = try await deployment.control("faults/release", "{}")
            for sign in held { #expect(!(try await sign.value).isEmpty) }
        }
    }

    @Test(
        "with every slot but the reserved one held by passthrough calls and their line full, a GitHub and an OpenID sign-in complete (code exchange, keys, profile) and a live profile is read, while one more passthrough call is refused"
    )
    func signInsKeepTheirSlots() async throws {
        try await Self.withLimits(calls: 3, reserved: 1) { deployment in
            var octocat = Browser(deployment)
            let uid = try await ProviderAPITests.signIn(&octocat, login: "octocat", provider: "github.com")
            let key = try await ProviderAPITests.key(deployment, ["api:github.com"])
            let repos = "/v1/users/\(uid)/providers/github.com/api/user/repos?per_page=1"

            // Two passthrough calls held by GitHub take both unreserved slots; three more fill
            // the line, and the next is refused.
            let calls = try await Self.fillUnreservedSlots(deployment, repos, key: key)
            let refused = try await ProviderAPITests.call(deployment, repos, key: key)
            #expect(refused.status == 503 && TrustTests.code(refused) == "upstream-unavailable", "\(refused.status) \(refused.bodyText)")

            // Sign-ins still run, in the reserved slot: GitHub's code exchange and profile reads,
            // the OpenID provider's discovery, keys, code exchange and userinfo.
            var pat = Browser(deployment)
            let patUID = try await ProviderAPITests.signIn(&pat, login: "private-pat", provider: "github.com")
            #expect(!patUID.isEmpty)
            var oidc = Browser(deployment)
            let oidcUID = try await ProviderAPITests.signIn(&oidc, login: "olive@oidc.example", provider: "oidc.emulator")
            #expect(!oidcUID.isEmpty)
            let userCalls = try await deployment.emulatorStats()["GET /github-api/user"] ?? 0
            let live = try await pat.send("\(deployment.gatewayURL)/v1/me/providers/github.com/profile?refresh=true")
            #expect(live.status == 200, "\(live.status) \(live.bodyText)")
            #expect(try await deployment.emulatorStats()["GET /github-api/user"] == userCalls + 1, "the live profile was not read from GitHub")
            // None of it moved a passthrough call: two still held, three still waiting.
            #expect(try await ProviderAPITests.upstreamCalls(deployment, "GET /github-api/user/repos") == 2)
            #expect(try await ResilienceTests.metric(deployment, "gatehouse_upstream_calls_waiting", [:]) == 3)

            try await Self.release(deployment, calls)
        }
    }

    @Test(
        "a webhook delivery refused for want of a slot spends no attempt: it waits with none counted and the refusal as its last error, and is delivered soon after slots free, not after its first backoff; a backlog of refused deliveries is tried again one round a poll interval, not without pause (SQLite, PostgreSQL)",
        arguments: [false, true]
    )
    func overloadSpendsNoWebhookAttempt(onPostgres: Bool) async throws {
        let database = onPostgres ? try await PostgresTestServer.freshDatabase() : nil
        let scopes = ["api:github.com", "admin:webhooks", "admin:keys"]
        // The service key: in PostgreSQL, made before the deployment starts (the helper writes SQLite).
        var postgresKey: String?
        if let database {
            let store = try PostgresTestServer.store(database)
            defer { store.shutdown() }
            try await store.migrate()
            postgresKey = try await ServiceKeyService(storage: store).create(name: "api", scopes: scopes).secret
        }
        // A spent attempt would wait an hour for its retry. Rounds start on a write here, or
        // every second (the default): the rate of a backlog's refusals shows whether the worker
        // waits between rounds that postponed deliveries.
        let webhooks: @Sendable (String) -> WebhookConfiguration = { url in
            var configuration = WebhookTests.sampleApp(events: [.accountCreated, .serviceKeyCreated])(url)
            configuration.backoff = [3600, 3600]
            configuration.pollInterval = .seconds(1)
            return configuration
        }
        try await Self.withLimits(calls: 3, reserved: 1, webhooks: webhooks, database: database) { deployment in
            var octocat = Browser(deployment)
            let uid = try await ProviderAPITests.signIn(&octocat, login: "octocat", provider: "github.com")
            let firstDelivered = try await WebhookTests.eventually(deployment) { $0.contains { $0.type == "account.created" } }
            let created = WebhookTests.types(firstDelivered).contains("account.created")
            #expect(created)
            let key = if let postgresKey { postgresKey } else { try await ProviderAPITests.key(deployment, scopes) }
            let repos = "/v1/users/\(uid)/providers/github.com/api/user/repos?per_page=1"

            // Every slot a delivery may take held, its line full.
            let calls = try await Self.fillUnreservedSlots(deployment, repos, key: key)

            // A new account's event: its delivery is refused, and waits without an attempt spent.
            var pat = Browser(deployment)
            _ = try await ProviderAPITests.signIn(&pat, login: "private-pat", provider: "github.com")
            var pending: [String: Any] = [:]
            for _ in 0..<400 where !((pending["lastError"] as? String)?.contains("too many calls") ?? false) {
                try await Task.sleep(for: .milliseconds(50))
                let listing = try jsonObject(try await ProviderAPITests.call(deployment, "/v1/admin/webhooks/deliveries?status=pending", key: key))
                pending = (listing["deliveries"] as? [[String: Any]])?.first ?? [:]
            }
            #expect((pending["lastError"] as? String)?.contains("not sent: too many calls") == true, "\(pending)")
            #expect(pending["attempts"] as? Int == 0, "\(pending)")
            let deliveredSoFar = WebhookTests.types(try await WebhookTests.received(deployment))
            let accountsSoFar = deliveredSoFar.filter { $0 == "account.created" }.count
            #expect(accountsSoFar == 1)

            // 24 more events, each refused: at most a round of 8 a second is claimed again (with
            // 20 ms to spare per round), where a worker going on at once would retry all 25
            // every second.
            for index in 0..<24 {
                let created = try await ProviderAPITests.call(
                    deployment, "/v1/admin/keys", key: key, method: "POST", headers: ["Content-Type": "application/json"],
                    body: Array(#"{"name":"burst-\#(index)","scopes":["api:github.com"]}"#.utf8))
                #expect(created.status == 201, "\(created.bodyText)")
            }
            try await Task.sleep(for: .seconds(2))
            let refusedBefore = try await ResilienceTests.metric(deployment, "gatehouse_upstream_calls_refused_total", [:]) ?? 0
            let window = ContinuousClock.now
            try await Task.sleep(for: .seconds(3))
            let refused = (try await ResilienceTests.metric(deployment, "gatehouse_upstream_calls_refused_total", [:]) ?? 0) - refusedBefore
            let seconds = Double((ContinuousClock.now - window).components.seconds) + 1
            #expect(refused <= 8 * (seconds + 1), "\(refused) refusals in \(seconds) s")

            // Slots free: the event goes out within seconds, not an hour.
            try await Self.release(deployment, calls)
            let delivered = try await WebhookTests.eventually(deployment) { received in
                received.filter { $0.type == "account.created" }.count == 2 && received.filter { $0.type == "service-key.created" }.count >= 24
            }
            let types = WebhookTests.types(delivered)
            let accounts = types.filter { $0 == "account.created" }.count
            let keys = types.filter { $0 == "service-key.created" }.count
            #expect(accounts == 2)
            #expect(keys >= 24)
        }
    }
}
