import CurlClient
import Foundation
import GRDB
@_spi(Testing) import GatehouseCore
import GatehousePostgres
import GatehouseSQLite
import GatehouseTestSupport
import Logging
import ProviderEmulator
import Testing

/// Webhooks end to end: the emulator's sample app receiver verifies every delivery's
/// signature and keeps it; faults on `POST /sample-app/webhooks` stand for a receiver that is
/// down; the deployment's clock is advanced past the backoff instead of sleeping.
@Suite("Webhooks")
struct WebhookTests {
    /// Every event to the sample app, checked for due deliveries every 20 ms.
    static func sampleApp(events: Set<WebhookEventType>? = nil) -> @Sendable (String) -> WebhookConfiguration {
        { emulatorURL in
            var configuration = WebhookConfiguration(endpoints: [
                .init(
                    name: "sample-app", url: "\(emulatorURL)/sample-app/webhooks", events: events, secrets: [EmulatorConfiguration.demoWebhookSecret])
            ])
            configuration.pollInterval = .milliseconds(20)
            configuration.purgeInterval = .milliseconds(50)
            return configuration
        }
    }

    /// An event the sample app received.
    struct Received {
        let id: String
        let type: String
        let data: [String: Any]
        let timestamp: String
        let signature: String
        let body: String
    }

    /// What the sample app received, oldest first.
    static func received(_ deployment: TestDeployment) async throws -> [Received] {
        let response = try await deployment.client.execute(OutboundRequest(url: "\(deployment.emulatorURL)/sample-app/webhooks?format=json"))
        let list = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [[String: Any]])
        return try list.reversed().map { item in
            let body = try #require(item["body"] as? String)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            return Received(
                id: try #require(item["id"] as? String), type: try #require(object["type"] as? String), data: object["data"] as? [String: Any] ?? [:],
                timestamp: item["timestamp"] as? String ?? "", signature: item["signature"] as? String ?? "", body: body)
        }
    }

    /// Waits (at most 20 s: the whole suite runs side by side on two cores) until `done` holds
    /// for what the sample app received.
    @discardableResult
    static func eventually(_ deployment: TestDeployment, _ done: ([Received]) -> Bool) async throws -> [Received] {
        let started = ContinuousClock.now
        var seen = try await received(deployment)
        // Generous: it ends as soon as `done`; a starved machine may take long to deliver.
        while !done(seen), ContinuousClock.now - started < .seconds(60) {
            try await Task.sleep(for: .milliseconds(20))
            seen = try await received(deployment)
        }
        return seen
    }

    static func types(_ events: [Received]) -> [String] { events.map(\.type) }

    /// The types of `events` after the first `count`, sorted: deliveries run side by side, so
    /// the events of one step may arrive in any order (the Webhooks article says so).
    static func types(_ events: [Received], after count: Int) -> [String] { events.dropFirst(count).map(\.type).sorted() }

    /// The first delivery of each event id, in the order received. Delivery is at least once
    /// (Webhooks): a delivery whose outcome the store did not record in time (a starved machine
    /// writes a claim tens of seconds late) is sent again, with the same id, which a receiver
    /// drops. Two events of one type with different ids stay two.
    static func distinct(_ events: [Received]) -> [Received] {
        var ids = Set<String>()
        return events.filter { ids.insert($0.id).inserted }
    }

    @Test(
        "every event fires in its case and only there: created on the first sign-in only, signed-in on each, linked, updated, unlinked, disabled, enabled, revoked, signed out, reauth-required once per dead grant, restored, deleted"
    )
    func eventsInTheirCases() async throws {
        try await withDeployment(webhooks: Self.sampleApp()) { deployment in
            var browser = Browser(deployment)
            let uid = try account(try await browser.complete(login: "octocat")).uid
            var seen = try await Self.eventually(deployment) { $0.count >= 2 }
            #expect(Self.types(seen, after: 0) == ["account.created", "account.signed-in"])
            let foundCreated = seen.first { $0.type == "account.created" }
            let created = try #require(foundCreated)
            #expect(created.data["uid"] as? String == uid && created.data["providerId"] as? String == "github.com")
            let holds = seen.first { $0.type == "account.signed-in" }?.data["isNewUser"] as? Bool == true
            #expect(holds)

            var again = Browser(deployment)
            #expect(try await again.complete(login: "octocat").status == 200)
            seen = try await Self.eventually(deployment) { $0.count >= 3 }
            #expect(Self.types(seen).suffix(1) == ["account.signed-in"], "a returning sign-in creates nothing")
            #expect(seen.last?.data["isNewUser"] as? Bool == false)

            #expect(try await browser.complete(login: "AdeleV@contoso.example", provider: "microsoft.com", mode: "link").status == 200)
            let key = try await ProviderAPITests.key(deployment, ["admin", "users:claims"])
            let claims = try await ProviderAPITests.call(
                deployment, "/v1/users/\(uid)/claims", key: key, method: "PUT", headers: ["Content-Type": "application/json"],
                body: Array(#"{"plan":"pro"}"#.utf8))
            #expect(claims.status == 200)
            // The same claims again change nothing and tell nobody.
            let same = try await ProviderAPITests.call(
                deployment, "/v1/users/\(uid)/claims", key: key, method: "PUT", headers: ["Content-Type": "application/json"],
                body: Array(#"{ "plan": "pro" }"#.utf8))
            #expect(same.status == 200)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me/providers/microsoft.com", method: "DELETE").status == 200)
            // Disabling a disabled account (enabling an enabled one, revoking the sessions of one
            // that has none left) succeeds and tells nobody.
            for action in ["revoke-sessions", "revoke-sessions", "disable", "disable", "enable", "enable"] {
                #expect(try await ProviderAPITests.call(deployment, "/v1/users/\(uid)/\(action)", key: key, method: "POST").status == 204)
            }
            // An unknown account changes nothing and tells nothing.
            #expect(try await ProviderAPITests.call(deployment, "/v1/users/nobody/disable", key: key, method: "POST").status == 404)
            seen = try await Self.eventually(deployment) { $0.count >= 9 }
            #expect(
                Self.types(seen, after: 3) == [
                    "account.disabled", "account.enabled", "account.sessions-revoked", "account.updated", "provider.linked", "provider.unlinked",
                ])
            let holds2 = seen.first { $0.type == "account.updated" }?.data["changes"] as? [String] == ["customClaims"]
            #expect(holds2)

            var fresh = Browser(deployment)
            #expect(try await fresh.complete(login: "octocat").status == 200)
            #expect(try await fresh.send("\(deployment.gatewayURL)/v1/auth/signout?all=true", method: "POST").status == 204)
            seen = try await Self.eventually(deployment) { $0.count >= 11 }
            #expect(Self.types(seen, after: 9) == ["account.signed-in", "session.signed-out-all"])
            let updates = seen.filter { $0.type == "account.updated" }.count
            #expect(updates == 1)

            // A dead Microsoft grant: told once, however often it is met; restored by a sign-in.
            var adele = Browser(deployment)
            #expect(try await MicrosoftSignInTests.signIn(&adele, MicrosoftSignInTests.adele).status == 200)
            _ = try await deployment.control("expire-tokens", "{}")
            _ = try await deployment.control("microsoft/revoke-refresh-tokens", "{}")
            let profile = "\(deployment.gatewayURL)/v1/me/providers/microsoft.com/profile"
            #expect(try await adele.send(profile).status == 409)
            #expect(try await adele.send(profile).status == 409)
            var back = Browser(deployment)
            #expect(try await MicrosoftSignInTests.signIn(&back, MicrosoftSignInTests.adele).status == 200)
            // Five events since the first eleven, in any order (deliveries run side by side):
            // waiting for one named event could stop before another of the same step arrived.
            seen = try await Self.eventually(deployment) { $0.count >= 16 }
            let tail = Self.types(seen, after: 11)
            #expect(tail == ["account.created", "account.signed-in", "account.signed-in", "grant.reauth-required", "grant.restored"], "\(tail)")
            let holds3 = seen.first { $0.type == "grant.reauth-required" }?.data["providerId"] as? String == "microsoft.com"
            #expect(holds3)

            #expect(try await back.send("\(deployment.gatewayURL)/v1/me", method: "DELETE").status == 204)
            seen = try await Self.eventually(deployment) { Self.types($0).last == "account.deleted" }
            #expect(Self.types(seen).last == "account.deleted")
            // Each event once, and never a token, a secret or a raw provider answer.
            #expect(Set(seen.map(\.id)).count == seen.count)
            let tokens = await deployment.emulator.issuedAccessTokens()
            for event in seen {
                let holds4 = !tokens.contains { event.body.contains($0) }
                #expect(holds4)
                #expect(!event.body.contains("rawUserInfo") && !event.body.contains("ghsk_") && !event.body.contains("refresh"))
            }
        }
    }

    @Test(
        "a transaction that fails after its change writes neither the change nor its event; the signature verifies with the PyPI standardwebhooks package"
    )
    func rolledBackWritesHaveNoEvent() async throws {
        try await withDeployment(webhooks: Self.sampleApp()) { deployment in
            // The fault: the outbox refuses the insert, after the account and link rows were
            // written in the same transaction.
            let database = try openSQLite(deployment.databasePath)
            try await database.write { db in
                try db.execute(sql: "CREATE TRIGGER refuse_outbox BEFORE INSERT ON webhook_outbox BEGIN SELECT RAISE(ABORT, 'injected'); END")
            }
            var browser = Browser(deployment)
            let failed = try await browser.complete(login: "octocat")
            #expect(failed.status >= 500, "\(failed.bodyText)")
            #expect(try await deployment.accountCount() == 0)
            try await database.write { db in try db.execute(sql: "DROP TRIGGER refuse_outbox") }
            var again = Browser(deployment)
            #expect(try await again.complete(login: "octocat").status == 200)
            let seen = try await Self.eventually(deployment) { $0.count >= 2 }
            #expect(Self.types(seen, after: 0) == ["account.created", "account.signed-in"], "only the committed sign-in's events")

            let python = try #require(
                ProcessInfo.processInfo.environment["GATEHOUSE_TEST_PYJWT_PYTHON"],
                "set GATEHOUSE_TEST_PYJWT_PYTHON to a python with standardwebhooks (scripts/test does)")
            let script = """
                import json, sys
                from standardwebhooks.webhooks import Webhook
                secret, events = sys.argv[1], json.load(open(sys.argv[2]))
                for event in events:
                    Webhook(secret).verify(event["body"], {"webhook-id": event["id"], "webhook-timestamp": event["timestamp"],
                                                           "webhook-signature": event["signature"]})
                print("verified", len(events))
                """
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("webhooks-\(UUID().uuidString).json")
            try JSONSerialization.data(
                withJSONObject: seen.map { ["id": $0.id, "timestamp": $0.timestamp, "signature": $0.signature, "body": $0.body] }
            )
            .write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let run = try await GatewayTokenTests.output(python, ["-c", script, EmulatorConfiguration.demoWebhookSecret, file.path])
            #expect(run.output.trimmingCharacters(in: .whitespacesAndNewlines) == "verified 2", "\(run.output)")
        }
    }

    @Test("a receiver answering 500 for a while, then 200, gets every event once per id; the first retry comes within 10 s")
    func retriesUntilDelivered() async throws {
        try await withDeployment(webhooks: Self.sampleApp()) { deployment in
            try await deployment.control("faults", #"{"endpoint":"POST /sample-app/webhooks","status":500,"times":6}"#)
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
            var other = Browser(deployment)
            #expect(try await other.complete(login: "private-pat").status == 200)
            // Four events, six failures: some attempts fail twice. The deployment's clock moves
            // 10 s at a time (the first retry is due after 5 s ± 20 %, the second 30 s later)
            // until every event arrived, 5 minutes of it at most.
            var seen = try await Self.received(deployment)
            for _ in 0..<30 where seen.count < 4 {
                deployment.clock.advance(by: 10)
                try await Task.sleep(for: .milliseconds(100))
                seen = try await Self.received(deployment)
            }
            seen = try await Self.eventually(deployment) { $0.count >= 4 }
            #expect(seen.count == 4)
            #expect(Set(seen.map(\.id)).count == 4, "each id once")
            #expect(Self.types(seen).sorted() == ["account.created", "account.created", "account.signed-in", "account.signed-in"])
            let metrics = try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/metrics")).bodyText
            #expect(metrics.contains(#"gatehouse_webhook_deliveries_total{endpoint="sample-app",outcome="retry"}"#))
            #expect(metrics.contains(#"gatehouse_webhook_events_total{type="account.created"} 2"#))
        }
    }

    @Test("the backlog gauges follow the delivery rounds, not only the hourly purge: two events waiting, then none")
    func backlogGaugesFollowRounds() async throws {
        let webhooks: @Sendable (String) -> WebhookConfiguration = { url in
            var configuration = Self.sampleApp()(url)
            configuration.purgeInterval = .seconds(3600)
            return configuration
        }
        try await withDeployment(webhooks: webhooks) { deployment in
            func depth() async throws -> Double? {
                let metrics = try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/metrics")).bodyText
                return metrics.split(separator: "\n").first { $0.hasPrefix("gatehouse_webhook_queue_depth ") }.flatMap { Double($0.dropFirst(30)) }
            }
            func eventually(_ expected: Double) async throws -> Double? {
                var seen = try await depth()
                for _ in 0..<400 where seen != expected {
                    try await Task.sleep(for: .milliseconds(50))
                    seen = try await depth()
                }
                return seen
            }
            try await deployment.control("faults", #"{"endpoint":"POST /sample-app/webhooks","status":500,"times":1000}"#)
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
            #expect(try await eventually(2) == 2, "account.created and account.signed-in wait after a failed attempt")
            _ = try await deployment.client.execute(OutboundRequest(method: "DELETE", url: "\(deployment.emulatorURL)/_emulator/faults"))
            for _ in 0..<30 where try await Self.received(deployment).count < 2 {
                deployment.clock.advance(by: 10)
                try await Task.sleep(for: .milliseconds(100))
            }
            let holds = try await Self.eventually(deployment) { $0.count >= 2 }.count == 2
            #expect(holds)
            #expect(try await eventually(0) == 0)
        }
    }

    /// The sample app taking `account.created`, for the tests of a `410 Gone`: the first retry an
    /// hour away, so that only a redelivery or the end of a pause sends a waiting event, however
    /// long a loaded machine takes between two steps; the pause 120 s, shorter than the default
    /// 5 minutes (the sample app refuses signatures more than 5 minutes off its own clock, which
    /// the test clock leaves behind when it advances) and long enough that the real time the
    /// test clock also follows (sign-ins, a `check` process on a loaded machine) cannot end it
    /// before the test advances it.
    static func pausableSampleApp(timeout: TimeInterval = 10) -> @Sendable (String) -> WebhookConfiguration {
        { url in
            var configuration = Self.sampleApp(events: [.accountCreated])(url)
            configuration.backoff = [3600, 3600]
            configuration.goneProbeInterval = 120
            configuration.timeout = timeout
            return configuration
        }
    }

    /// The pending deliveries the admin listing shows once `done` holds of them (polled every
    /// 20 ms, at most 10 s).
    static func pending(_ deployment: TestDeployment, key: String, until done: ([[String: Any]]) -> Bool) async throws -> [[String: Any]] {
        var pending: [[String: Any]] = []
        for _ in 0..<500 {
            pending =
                try jsonObject(try await ProviderAPITests.call(deployment, "/v1/admin/webhooks/deliveries?status=pending", key: key))["deliveries"]
                as? [[String: Any]] ?? []
            if done(pending) { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        return pending
    }

    @Test(
        "410 Gone pauses the endpoint: its events wait unsent, one tries again at each interval, an answer resumes it; the admin listing shows them; redelivery sends one again"
    )
    func goneAndAdministration() async throws {
        try await withDeployment(webhooks: Self.pausableSampleApp()) { deployment in
            let key = try await ProviderAPITests.key(deployment, ["admin:webhooks"])
            // A receiver that is down: the delivery waits, listed as pending with its last status.
            try await deployment.control("faults", #"{"endpoint":"POST /sample-app/webhooks","status":503,"times":1}"#)
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
            let pending = try await Self.pending(deployment, key: key) { $0.first?["lastStatus"] as? Int == 503 }
            #expect(pending.count == 1)
            #expect(pending.first?["type"] as? String == "account.created")
            #expect(pending.first?["attempts"] as? Int == 1)
            // The event's payload (an account's) only to a key that may read accounts.
            #expect(pending.first?["event"] is NSNull, "\(pending)")
            let reader = try await ProviderAPITests.key(deployment, ["admin:webhooks", "admin:users"])
            let read = try await Self.pending(deployment, key: reader) { _ in true }
            #expect((read.first?["event"] as? [String: Any])?["type"] as? String == "account.created", "\(read)")
            let id = try #require(pending.first?["id"] as? String)
            // Time passes beyond the default first retry (5 s ± 20 %) and the dispatcher polls:
            // the event still waits for its backoff.
            deployment.clock.advance(by: 10)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await Self.received(deployment).isEmpty)
            // Redelivered now, without waiting for the backoff.
            #expect(
                try await ProviderAPITests.call(deployment, "/v1/admin/webhooks/deliveries/\(id)/redeliver", key: key, method: "POST").status == 202)
            let holds = try await Self.eventually(deployment) { $0.count == 1 }.count == 1
            #expect(holds)
            #expect(
                try await ProviderAPITests.call(deployment, "/v1/admin/webhooks/deliveries/\(id)/redeliver", key: key, method: "POST").status == 404)
            // On the audit record once, with the key and the delivery (the refused retry is not).
            let redelivered = AuditTrailTests.auditLines(deployment.logs.lines).filter { $0["audit.event"] as? String == "webhook.redelivered" }
            #expect(redelivered.count == 1, "\(redelivered)")
            #expect((redelivered.first?["audit.actor"] as? String)?.hasPrefix("service-key:") == true)
            #expect(redelivered.first?["webhook.delivery"] as? String == id)

            // 410: the endpoint pauses (for `goneProbeInterval`). The event waits (no attempt
            // spent), and so does the next one, unsent: a proxy or a deploy in front of the receiver may say 410 for a moment.
            try await deployment.control("faults", #"{"endpoint":"POST /sample-app/webhooks","status":410,"times":1}"#)
            var second = Browser(deployment)
            #expect(try await second.complete(login: "private-pat").status == 200)
            // Until that event's try was answered (the listing shows `lastError` as null before).
            let paused = try await Self.pending(deployment, key: key) { list in
                list.contains { $0["id"] as? String != id && ($0["lastError"] as? String)?.contains("410 Gone") == true }
            }
            let gone = paused.first { $0["id"] as? String != id }
            #expect((gone?["lastError"] as? String)?.contains("410 Gone") == true, "\(paused)")
            #expect(gone?["attempts"] as? Int == 0)
            let calls = try await deployment.emulatorStats()["POST /sample-app/webhooks"]
            var third = Browser(deployment)
            #expect(try await third.complete(login: "unverified-uma").status == 200)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await deployment.emulatorStats()["POST /sample-app/webhooks"] == calls, "nothing sent to a paused endpoint")
            let holds2 = deployment.logs.lines.contains { $0.contains("410 Gone") && $0.contains("\"error\"") }
            #expect(holds2)
            // gatehouse check names the endpoint's undelivered events and its last failure.
            let check = try await KeysCommandTests.run(
                ["check", "--offline"],
                environment: [
                    "GATEHOUSE_PUBLIC_URL": deployment.gatewayURL, "GATEHOUSE_DEVELOPMENT": "true",
                    "GATEHOUSE_DATA_DIR": (deployment.databasePath as NSString).deletingLastPathComponent,
                    "GATEHOUSE_ENCRYPTION_KEY": deployment.vaultKey.base64EncodedString(),
                    "GATEHOUSE_GITHUB_CLIENT_ID": TestDeployment.githubClient.id,
                    "GATEHOUSE_GITHUB_CLIENT_SECRET": TestDeployment.githubClient.secret,
                    "GATEHOUSE_WEBHOOK_SAMPLE_APP_URL": "\(deployment.emulatorURL)/sample-app/webhooks",
                    "GATEHOUSE_WEBHOOK_SAMPLE_APP_SECRETS": EmulatorConfiguration.demoWebhookSecret,
                ], removing: ["GATEHOUSE_DATABASE_URL"])
            #expect(check.output.contains("webhook sample-app: 2 pending, 0 failed; last attempt: "), "\(check.output)")
            // An interval on, one event tries the endpoint again: it answers, and both arrive.
            deployment.clock.advance(by: 121)
            // At least: once that try was answered, the other may follow at once.
            let tried = try await Self.eventually(deployment) { $0.count >= 2 }.count
            #expect(tried >= 2)
            // The other waited for that try's answer: up to the delivery timeout (10 s) and a second.
            deployment.clock.advance(by: 12)
            let resumed = try await Self.eventually(deployment) { $0.count == 3 }
            #expect(Self.types(resumed) == ["account.created", "account.created", "account.created"])
            let resumedLine = deployment.logs.lines.contains { $0.contains("deliveries to it resume") }
            #expect(resumedLine)
            // Other scopes are refused.
            let profileKey = try await ProviderAPITests.key(deployment, ["profile:read"])
            #expect(try await ProviderAPITests.call(deployment, "/v1/admin/webhooks/deliveries", key: profileKey).status == 403)
            let adminKey = try await ProviderAPITests.key(deployment, ["admin"])
            #expect(try await ProviderAPITests.call(deployment, "/v1/admin/webhooks/deliveries?status=failed", key: adminKey).status == 200)
            #expect(try await ProviderAPITests.call(deployment, "/v1/admin/webhooks/deliveries?status=lost", key: adminKey).status == 400)
        }
    }

    @Test(
        "while one event of a paused endpoint tries it again, the others wait for that try's answer, up to the delivery timeout: one try at a time; then the endpoint resumes"
    )
    func aPausedEndpointIsTriedOnceAtATime() async throws {
        try await withDeployment(webhooks: Self.pausableSampleApp(timeout: 30)) { deployment in
            let key = try await ProviderAPITests.key(deployment, ["admin:webhooks"])
            // 410: the endpoint pauses; two events wait for it.
            try await deployment.control("faults", #"{"endpoint":"POST /sample-app/webhooks","status":410,"times":1}"#)
            for login in ["octocat", "private-pat"] {
                var browser = Browser(deployment)
                #expect(try await browser.complete(login: login).status == 200)
            }
            let paused = try await Self.pending(deployment, key: key) { $0.count == 2 && $0.allSatisfy { $0["lastError"] is String } }
            try #require(paused.count == 2, "\(paused)")
            let before = try await deployment.emulatorStats()["POST /sample-app/webhooks"] ?? 0
            // The interval passes: one event tries the endpoint, whose answer the receiver holds.
            try await deployment.control("faults", #"{"endpoint":"POST /sample-app/webhooks","holdMs":25000,"times":1}"#)
            deployment.clock.advance(by: 121)
            var calls = before
            for _ in 0..<1000 where calls == before {
                try await Task.sleep(for: .milliseconds(20))
                calls = try await deployment.emulatorStats()["POST /sample-app/webhooks"] ?? 0
            }
            try #require(calls == before + 1, "the try reached the receiver")
            // Longer than a few seconds, shorter than the try's 30 s timeout: the other event still
            // waits for that answer, however often the dispatcher looks (every 20 ms here). On one
            // instance a round ends with its slowest attempt; the other event's stored wait (the
            // try's timeout) keeps other instances from claiming it meanwhile.
            deployment.clock.advance(by: 6)
            try await Task.sleep(for: .seconds(1))
            deployment.clock.advance(by: 9)
            try await Task.sleep(for: .seconds(1))
            #expect(try await deployment.emulatorStats()["POST /sample-app/webhooks"] == before + 1, "one try at a time")
            #expect(try await Self.received(deployment).isEmpty)
            // The answer comes: the endpoint resumes, and the other event goes once its wait ends.
            let release = OutboundRequest(method: "POST", url: "\(deployment.emulatorURL)/_emulator/faults/release")
            #expect(try await deployment.client.execute(release).status == 204)
            let first = try await Self.eventually(deployment) { $0.count == 1 }.count
            #expect(first == 1)
            deployment.clock.advance(by: 20)
            let both = try await Self.eventually(deployment) { $0.count == 2 }
            #expect(Self.types(both) == ["account.created", "account.created"])
        }
    }

    @Test(
        "a delivery cancelled with its dispatcher (the gateway stopping) spends no attempt: a rolling restart does not use up an event's retries",
        arguments: ["SQLite", "PostgreSQL"])
    func cancelledDeliverySpendsNoAttempt(store: String) async throws {
        let database = store == "PostgreSQL" ? try await PostgresTestServer.freshDatabase() : nil
        // The deployment delivers nothing itself (no webhooks): this test's dispatcher alone
        // works its store, with a client of its own.
        try await withDeployment(database: database) { deployment in
            let postgres = try database.map { try PostgresTestServer.store($0) }
            defer { postgres?.shutdown() }
            let storage: any GatehouseStorage = try postgres ?? SQLiteStorage(path: deployment.databasePath)
            let event = try await Self.recordDisabledAccount(deployment, storage)
            // The receiver holds its answer (until released): the delivery is in flight when its
            // dispatcher stops.
            try await TrustTests.fault(deployment, ["endpoint": "POST /sample-app/webhooks", "status": 200, "holdMs": 60_000, "times": 1])
            let http = CurlHTTPClient(configuration: CurlClientConfiguration(timeout: .seconds(120)))
            defer { http.shutdown() }
            let dispatcher = WebhookDispatcher(
                configuration: Self.sampleApp()(deployment.emulatorURL), storage: storage, http: http, clock: deployment.clock,
                metrics: .disabled, logger: Logger(label: "test"))
            let running = Task { await dispatcher.run() }
            var inFlight = false
            for _ in 0..<500 where !inFlight {
                inFlight = http.load.inFlight == 1
                if !inFlight { try await Task.sleep(for: .milliseconds(20)) }
            }
            try #require(inFlight, "the delivery started")
            let cancelled = ContinuousClock.now
            running.cancel()
            await running.value
            // Well under the receiver's 60 s hold, with room for a loaded machine.
            #expect(ContinuousClock.now - cancelled < .seconds(30), "the stop waited for the receiver")
            let waiting = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
            #expect(waiting.map(\.eventId) == [event.id])
            #expect(waiting.first?.attempts == 0, "\(waiting)")
            _ = try await deployment.control("faults/release", "{}")
        }
    }

    /// Signs a user in and records an `account.disabled` event for the sample app with the
    /// account's change, in `storage` (the deployment's own store): the event.
    static func recordDisabledAccount(_ deployment: TestDeployment, _ storage: any GatehouseStorage) async throws -> WebhookEvent {
        var browser = Browser(deployment)
        let uid = try account(try await browser.complete(login: "octocat")).uid
        let event = WebhookEvent.account(.accountDisabled, uid: uid, at: deployment.clock.now())
        let entry = OutboxEntry(
            eventId: event.id, endpoint: "sample-app", type: event.type.rawValue, payload: try JSONCoding.encoder().encode(event),
            createdAt: event.timestamp)
        _ = try await Outbox.$entries.withValue([entry]) { try await storage.setDisabled(uid: uid, disabled: true) }
        return event
    }

    @Test(
        "two instances on one PostgreSQL whose clocks disagree by an hour, longer than a lease: the one ahead does not claim an event the other is delivering, which is sent once"
    )
    func instancesWithSkewedClocksSendAnEventOnce() async throws {
        let database = try await PostgresTestServer.freshDatabase()
        // The deployment delivers nothing itself (no webhooks): two dispatchers of this test's
        // work its store, one of them with a clock an hour ahead (further than its lease lasts).
        try await withDeployment(database: database) { deployment in
            let storage = try PostgresTestServer.store(database)
            defer { storage.shutdown() }
            _ = try await Self.recordDisabledAccount(deployment, storage)
            let http = CurlHTTPClient(configuration: CurlClientConfiguration(timeout: .seconds(120)))
            defer { http.shutdown() }
            var configuration = Self.sampleApp()(deployment.emulatorURL)
            configuration.timeout = 110  // a lease of 115 s: longer than a loaded machine takes to the second claim
            let ahead = OffsetClock()
            ahead.advance(by: 3600)
            let dispatchers = [deployment.clock, ahead].map { clock in
                WebhookDispatcher(
                    configuration: configuration, storage: storage, http: http, clock: clock, metrics: .disabled, logger: Logger(label: "test"))
            }
            // The receiver has the call and holds its answer (until released): the delivery is in flight.
            let delivering = try await deployment.holdingHook("POST /sample-app/webhooks", milliseconds: 100_000, answer: "{}") {
                try await dispatchers[0].round("sample-app")
            }
            let second = try await dispatchers[1].round("sample-app")
            #expect(second.claimed == 0, "the instance ahead claimed the event being delivered")
            _ = try await deployment.control("faults/release", "{}")
            #expect(try await delivering.value.claimed == 1)
            // The fault answered for the sample app, which so records nothing: the calls are counted.
            #expect(try await deployment.emulatorStats()["POST /sample-app/webhooks"] == 1)
            #expect(try await storage.outboxEntries(status: .pending, after: nil, limit: 10).isEmpty)
        }
    }

    @Test("undelivered events are dropped after the retention, with the metric and a log line")
    func retention() async throws {
        try await withDeployment(webhooks: Self.sampleApp()) { deployment in
            try await deployment.control("faults", #"{"endpoint":"POST /sample-app/webhooks","status":500}"#)
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
            let database = try openSQLite(deployment.databasePath)
            func outbox() async throws -> Int { try await database.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM webhook_outbox") ?? -1 } }
            #expect(try await outbox() == 2)
            deployment.clock.advance(by: 3 * 86400 + 60)
            // The metric and the log line follow the deletion's commit: each is waited for.
            func metrics() async throws -> String {
                try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/metrics")).bodyText
            }
            let dropped = #"gatehouse_webhook_events_dropped_total{endpoint="sample-app"} 2"#
            var left = try await outbox()
            var counted = try await metrics().contains(dropped)
            var logged = deployment.logs.lines.contains { $0.contains("dropped after the retention") }
            for _ in 0..<500 where left != 0 || !counted || !logged {
                try await Task.sleep(for: .milliseconds(20))
                left = try await outbox()
                counted = try await metrics().contains(dropped)
                logged = deployment.logs.lines.contains { $0.contains("dropped after the retention") }
            }
            #expect(left == 0)
            #expect(counted)
            #expect(logged)
        }
    }

    @Test("gatehouse keys create-service and revoke record service-key events that the running gateway delivers")
    func serviceKeyEvents() async throws {
        try await withDeployment(webhooks: Self.sampleApp(events: [.serviceKeyCreated, .serviceKeyRevoked])) { deployment in
            let folder = (deployment.databasePath as NSString).deletingLastPathComponent
            let environment = [
                "GATEHOUSE_WEBHOOK_SAMPLE_APP_URL": "\(deployment.emulatorURL)/sample-app/webhooks",
                "GATEHOUSE_WEBHOOK_SAMPLE_APP_SECRETS": EmulatorConfiguration.demoWebhookSecret,
                "GATEHOUSE_WEBHOOK_SAMPLE_APP_EVENTS": "service-key.created,service-key.revoked",
                "GATEHOUSE_ENCRYPTION_KEY": deployment.vaultKey.base64EncodedString(),
            ]
            let created = try await KeysCommandTests.run(
                ["keys", "create-service", "billing", "--scopes", "profile:read", "--data-dir", folder], environment: environment)
            #expect(created.status == 0, "\(created.output)")
            let foundId = created.output.firstMatch(of: #/Created service key (sk_[A-Za-z0-9_-]+)/#).map { String($0.1) }
            let id = try #require(foundId)
            #expect(try await KeysCommandTests.run(["keys", "revoke", id, "--data-dir", folder], environment: environment).status == 0)
            let seen = Self.distinct(try await Self.eventually(deployment) { Self.distinct($0).count >= 2 })
            #expect(Self.types(seen, after: 0) == ["service-key.created", "service-key.revoked"])
            let holds = seen.allSatisfy { $0.data["keyId"] as? String == id }
            #expect(holds)
            let holds2 = seen.first { $0.type == "service-key.created" }?.data["scopes"] as? [String] == ["profile:read"]
            #expect(holds2)
            let holds3 = !seen.contains { $0.body.contains("ghsk_") }
            #expect(holds3, "never the secret")
        }
    }

    @Test(
        "an event of a type the endpoint's configuration here does not take (narrowed since it was recorded) is not sent: it waits ten minutes for an instance that takes it, no attempt spent, then fails; the endpoint gets the types it takes (PostgreSQL)"
    )
    func narrowedEndpointSendsNoOlderTypes() async throws {
        let database = try await PostgresTestServer.freshDatabase()
        let store = try PostgresTestServer.store(database)
        defer { store.shutdown() }
        try await store.migrate()
        let (_, secret) = try await ServiceKeyService(storage: store).create(name: "ops", scopes: ["admin:webhooks"])
        try await withDeployment(webhooks: Self.sampleApp(events: [.accountCreated]), database: database) { deployment async throws in
            var browser = Browser(deployment)
            let uid = try account(try await browser.complete(login: "octocat")).uid
            let first = try await Self.eventually(deployment) { $0.count >= 1 }.map(\.type)
            #expect(first == ["account.created"])
            // An account.disabled recorded for this endpoint while it still took every type
            // (by an instance configured so, or before a restart), with the write it describes.
            let recorded = OutboxEntry(
                eventId: "evt_narrowed", endpoint: "sample-app", type: "account.disabled",
                payload: Data(#"{"type":"account.disabled","id":"evt_narrowed","data":{}}"#.utf8), createdAt: deployment.clock.now())
            let disabled = try await Outbox.$entries.withValue([recorded]) { try await store.setDisabled(uid: uid, disabled: true) }
            #expect(disabled == .changed)
            func listed(_ status: String) async throws -> [String: Any]? {
                let listing = try await ProviderAPITests.call(deployment, "/v1/admin/webhooks/deliveries?status=\(status)", key: secret)
                return (try jsonObject(listing)["deliveries"] as? [[String: Any]] ?? []).first { $0["eventId"] as? String == "evt_narrowed" }
            }
            var waiting: [String: Any]?
            for _ in 0..<500 where waiting?["lastError"] as? String == nil {
                try await Task.sleep(for: .milliseconds(20))
                waiting = try await listed("pending")
            }
            #expect(
                waiting?["lastError"] as? String == "not sent: this instance's configuration of the endpoint does not take account.disabled events",
                "\(String(describing: waiting))")
            #expect(waiting?["attempts"] as? Int == 0)
            // Ten minutes after it was recorded, no instance having taken it, it fails.
            deployment.clock.advance(by: 601)
            var failed: [String: Any]?
            for _ in 0..<500 where failed == nil {
                try await Task.sleep(for: .milliseconds(20))
                failed = try await listed("failed")
            }
            #expect(failed?["lastError"] as? String == "the endpoint does not take account.disabled events", "\(String(describing: failed))")
            #expect(try await Self.received(deployment).map(\.type) == ["account.created"])
            let metrics = try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/metrics")).bodyText
            #expect(metrics.contains(#"gatehouse_webhook_deliveries_total{endpoint="sample-app",outcome="not-taken"} 2"#), "\(metrics)")
        }
    }

    @Test("three instances on one PostgreSQL: each of 1,000 events is delivered exactly once while all are healthy")
    func exactlyOnceAcrossInstances() async throws {
        let database = try await PostgresTestServer.freshDatabase()
        let store = try PostgresTestServer.store(database)
        defer { store.shutdown() }
        try await store.migrate()
        let (_, secret) = try await ServiceKeyService(storage: store).create(name: "claims", scopes: ["users:claims"])
        try await withDeployment(webhooks: Self.sampleApp(events: [.accountUpdated]), database: database, instances: 3) { deployment async throws in
            var browser = Browser(deployment)
            let uid = try account(try await browser.complete(login: "octocat")).uid
            // 1,000 changes, spread over the three instances, 8 at a time.
            let failures = try await withThrowingTaskGroup(of: Int.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var failures = 0
                        for index in stride(from: worker, to: 1000, by: 8) {
                            let instance = deployment.gatewayURLs[index % 3]
                            let response = try await deployment.client.execute(
                                OutboundRequest(
                                    method: "PUT", url: "\(instance)/v1/users/\(uid)/claims",
                                    headers: ["Authorization": "Bearer \(secret)", "Content-Type": "application/json"],
                                    body: Array(#"{"n":\#(index)}"#.utf8)))
                            if response.status != 200 { failures += 1 }
                        }
                        return failures
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(failures == 0)
            let started = ContinuousClock.now
            var seen = try await Self.received(deployment)
            // Seconds unloaded; the bound only ends a run that cannot pass.
            while seen.count < 1000, ContinuousClock.now - started < .seconds(180) {
                try await Task.sleep(for: .milliseconds(100))
                seen = try await Self.received(deployment)
            }
            try await Task.sleep(for: .milliseconds(300))
            seen = try await Self.received(deployment)
            #expect(seen.count == 1000, "every event once")
            #expect(Set(seen.map(\.id)).count == 1000, "no id twice")
            let holds = seen.allSatisfy { $0.type == "account.updated" }
            #expect(holds)
        }
    }
}
