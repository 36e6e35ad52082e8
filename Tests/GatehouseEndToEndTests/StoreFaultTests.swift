import CurlClient
import Foundation
import GRDB
import GatehouseCore
import GatehouseTestSupport
import Testing

/// Issue #21: what a store failure in the middle of a request leaves behind.
@Suite("Store faults")
struct StoreFaultTests {
    @Test("a store error while a refresh is answered leaves the refresh token usable: nothing was rotated")
    func refreshFailingAfterItsReadsRotatesNothing() async throws {
        // The database is changed behind the gateway's back, which only its own writes (and a
        // shared store's change feed) tell its account cache about: the cache is off, so that
        // every read reaches the broken rows.
        try await withDeployment(gateway: { $0.accountCacheLifetime = 0 }) { deployment in
            let (_, _, refreshToken) = try await GatewayTokenTests.signedIn(deployment)
            // The links table goes away under the running gateway (as a broken disk or a lost
            // connection would fail the statement): the answer needs the user's links.
            let database = try openSQLite(deployment.databasePath)
            try await database.write { try $0.execute(sql: "ALTER TABLE provider_links RENAME TO provider_links_away") }
            let failed = try await GatewayTokenTests.refresh(deployment, refreshToken)
            #expect(failed.status == 500, "\(failed.status): \(failed.bodyText)")
            // Worded for an OAuth client too, which reads RFC 6749's `error`.
            #expect(try jsonObject(failed)["error"] as? String == "server_error", "\(failed.bodyText)")
            // The log says which store failure it was, not just a type name.
            let holds = deployment.logs.lines.contains { $0.contains("request failed") && $0.contains("no such table: provider_links") }
            #expect(holds)
            try await database.write { try $0.execute(sql: "ALTER TABLE provider_links_away RENAME TO provider_links") }

            // The client keeps its token and retries: it was never spent.
            let retried = try await GatewayTokenTests.refresh(deployment, refreshToken)
            #expect(retried.status == 200, "\(retried.bodyText)")
            let successor = try #require(try jsonObject(retried)["refreshToken"] as? String)
            #expect(try await GatewayTokenTests.refresh(deployment, successor).status == 200, "the family lives on")
        }
    }

    @Test(
        "a store error part-way through an ID-token sign-in leaves the token presentable again: the app's retry signs in instead of being told the token was used"
    )
    func idTokenSignInFailingLeavesTheTokenUnspent() async throws {
        try await withDeployment { deployment in
            let rawNonce = "retried-after-a-store-error"
            let token = try await OIDCSignInTests.mint(
                deployment, issuer: "oidc", hint: OIDCSignInTests.olive, extra: #", "nonce": "\#(SecureRandom.digest(rawNonce))""#)
            let body = #"{"providerId": "oidc.emulator", "idToken": "\#(token)", "rawNonce": "\#(rawNonce)"}"#
            // The session is written, then its first refresh token fails to be.
            let database = try openSQLite(deployment.databasePath)
            try await database.write { try $0.execute(sql: "ALTER TABLE refresh_tokens RENAME TO refresh_tokens_away") }
            var browser = Browser(deployment)
            let failed = try await browser.json("/v1/auth/idtoken", body)
            #expect(failed.status >= 500, "\(failed.status): \(failed.bodyText)")
            try await database.write { try $0.execute(sql: "ALTER TABLE refresh_tokens_away RENAME TO refresh_tokens") }

            let retried = try await browser.json("/v1/auth/idtoken", body)
            #expect(retried.status == 200, "\(retried.bodyText)")
            let refreshToken = try #require(try jsonObject(retried)["refreshToken"] as? String)
            #expect(try await GatewayTokenTests.refresh(deployment, refreshToken).status == 200)
            // Signed in, the token is spent as ever.
            #expect(try await browser.json("/v1/auth/idtoken", body).status == 400)
        }
    }

    @Test(
        "an ID-token sign-in whose first refresh token the store refuses leaves no session behind, nor its use, nor an account.signed-in event: the session and its token commit together"
    )
    func idTokenSessionAndTokenCommitTogether() async throws {
        try await withDeployment(webhooks: WebhookTests.sampleApp()) { deployment in
            let rawNonce = "refused-refresh-token"
            let token = try await OIDCSignInTests.mint(
                deployment, issuer: "oidc", hint: OIDCSignInTests.olive, extra: #", "nonce": "\#(SecureRandom.digest(rawNonce))""#)
            let body = #"{"providerId": "oidc.emulator", "idToken": "\#(token)", "rawNonce": "\#(rawNonce)"}"#
            // The receiver refuses every delivery: an event recorded stays in the outbox to be counted.
            _ = try await deployment.control("faults", #"{"endpoint": "POST /sample-app/webhooks", "status": 500}"#)
            let database = try openSQLite(deployment.databasePath)
            try await database.write {
                try $0.execute(sql: "CREATE TRIGGER refused BEFORE INSERT ON refresh_tokens BEGIN SELECT RAISE(ABORT, 'refused'); END")
            }
            var browser = Browser(deployment)
            let failed = try await browser.json("/v1/auth/idtoken", body)
            #expect(failed.status >= 500, "\(failed.status): \(failed.bodyText)")
            let left = try await database.read { db in
                try ["sessions", "session_uses"].map { try Int.fetchOne(db, sql: "SELECT count(*) FROM \($0)") ?? -1 }
            }
            #expect(left == [0, 0])
            let signedIn = try await database.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM webhook_outbox WHERE type = 'account.signed-in'") ?? -1
            }
            #expect(signedIn == 0)
            try await database.write { try $0.execute(sql: "DROP TRIGGER refused") }
            #expect(try await browser.json("/v1/auth/idtoken", body).status == 200)
            let recorded = try await database.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM webhook_outbox WHERE type = 'account.signed-in'") ?? -1
            }
            #expect(recorded == 1, "the sign-in that succeeded is told once")
        }
    }

    @Test("a store error while the one-time result is redeemed leaves it redeemable: its tokens and its removal commit together")
    func resultRedemptionFailingLeavesTheResult() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let resultID = try await browser.signIn(login: "octocat")
            let database = try openSQLite(deployment.databasePath)
            try await database.write { try $0.execute(sql: "ALTER TABLE refresh_tokens RENAME TO refresh_tokens_away") }
            let failed = try await browser.result(resultID)
            #expect(failed.status >= 500, "\(failed.status): \(failed.bodyText)")
            try await database.write { try $0.execute(sql: "ALTER TABLE refresh_tokens_away RENAME TO refresh_tokens") }

            let retried = try await browser.result(resultID)
            #expect(retried.status == 200, "\(retried.bodyText)")
            let refreshToken = try #require(try jsonObject(retried)["refreshToken"] as? String)
            #expect(try await GatewayTokenTests.refresh(deployment, refreshToken).status == 200)
            #expect(try await browser.result(resultID).status == 404, "still one-time")
        }
    }
}

extension StoreFaultTests {
    @Test("a session ended while its one-time result is redeemed answers as an ended session, not 500, and consumes nothing")
    func sessionEndedDuringRedemption() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let resultID = try await browser.signIn(login: "octocat")
            // The session ends (a sign-out everywhere on another instance) between the
            // redemption's read of it and the write that takes the result.
            let database = try openSQLite(deployment.databasePath)
            try await database.write {
                try $0.execute(sql: "CREATE TRIGGER end_u BEFORE UPDATE ON signin_results BEGIN DELETE FROM sessions; END")
                try $0.execute(sql: "CREATE TRIGGER end_d BEFORE DELETE ON signin_results BEGIN DELETE FROM sessions; END")
            }
            let ended = try await browser.result(resultID)
            #expect(ended.status == 400, "\(ended.status): \(ended.bodyText)")
            #expect(try jsonObject(ended)["code"] as? String == "invalid-refresh-token", "\(ended.bodyText)")
            try await database.write {
                try $0.execute(sql: "DROP TRIGGER end_u")
                try $0.execute(sql: "DROP TRIGGER end_d")
            }
            // Nothing was taken: the write rolled back whole (the trigger's end of the session
            // with it), so the result is still there.
            let retried = try await browser.result(resultID)
            #expect(retried.status == 200, "\(retried.bodyText)")
        }
    }

    @Test("a session ended before an ID-token sign-in stores its first refresh token answers retry, not 500, and the token stays presentable")
    func sessionEndedDuringIDTokenSignIn() async throws {
        try await withDeployment { deployment in
            let rawNonce = "ended-as-it-was-written"
            let token = try await OIDCSignInTests.mint(
                deployment, issuer: "oidc", hint: OIDCSignInTests.olive, extra: #", "nonce": "\#(SecureRandom.digest(rawNonce))""#)
            let body = #"{"providerId": "oidc.emulator", "idToken": "\#(token)", "rawNonce": "\#(rawNonce)"}"#
            // Every new session ends as it is written (signed out everywhere at once).
            let database = try openSQLite(deployment.databasePath)
            try await database.write {
                try $0.execute(sql: "CREATE TRIGGER end_new AFTER INSERT ON sessions BEGIN DELETE FROM sessions WHERE family_id = NEW.family_id; END")
            }
            var browser = Browser(deployment)
            let ended = try await browser.json("/v1/auth/idtoken", body)
            #expect(ended.status == 503, "\(ended.status): \(ended.bodyText)")
            #expect(try jsonObject(ended)["code"] as? String == "storage-unavailable", "\(ended.bodyText)")
            #expect(ended.headers["retry-after"] == "1")
            try await database.write { try $0.execute(sql: "DROP TRIGGER end_new") }
            let retried = try await browser.json("/v1/auth/idtoken", body)
            #expect(retried.status == 200, "\(retried.bodyText)")
        }
    }

    @Test(
        "a re-authentication whose replaced session cannot be ended is not redeemed: nothing is committed, both tokens stay as they were, and the retry ends the old session"
    )
    func reauthenticationEndsItsSessionInItsCommit() async throws {
        try await withDeployment { deployment in
            var signIn = Browser(deployment)
            let first = try await signIn.result(try await signIn.signIn(login: "octocat"))
            let idToken = try #require(try jsonObject(first)["idToken"] as? String)
            var page = Browser(deployment)
            let resultID = try await AccountLinkingTests.reauthenticate(deployment, &page, bearer: idToken)
            // The store refuses to end any session (a broken disk, a lost connection).
            let database = try openSQLite(deployment.databasePath)
            try await database.write {
                try $0.execute(sql: "CREATE TRIGGER keep_sessions BEFORE DELETE ON sessions BEGIN SELECT RAISE(ABORT, 'sessions are kept'); END")
            }
            let failed = try await page.result(resultID)
            #expect(failed.status >= 500, "\(failed.status): \(failed.bodyText)")
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 200, "the old session goes on: nothing was redeemed")
            try await database.write { try $0.execute(sql: "DROP TRIGGER keep_sessions") }
            let redeemed = try await page.result(resultID)
            #expect(redeemed.status == 200, "\(redeemed.bodyText)")
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 401, "replaced in the redemption's commit")
            let newToken = try #require(try jsonObject(redeemed)["idToken"] as? String)
            #expect(try await GatewayTokenTests.bearer(deployment, newToken).status == 200)
        }
    }

    /// `POST /v1/auth/idtoken` with a fresh emulator ID token for `nonce`, in `mode`, as `bearer`'s caller.
    static func postIDToken(_ deployment: TestDeployment, _ nonce: String, mode: String, bearer: String?) async throws -> OutboundResponse {
        let token = try await OIDCSignInTests.mint(
            deployment, issuer: "oidc", hint: OIDCSignInTests.olive, extra: #", "nonce": "\#(SecureRandom.digest(nonce))""#)
        var headers: OutboundHeaders = ["Content-Type": "application/json"]
        if let bearer { headers.add("Authorization", "Bearer \(bearer)") }
        let body = #"{"providerId": "oidc.emulator", "idToken": "\#(token)", "rawNonce": "\#(nonce)", "mode": "\#(mode)"}"#
        return try await deployment.client.execute(
            OutboundRequest(method: "POST", url: "\(deployment.gatewayURL)/v1/auth/idtoken", headers: headers, body: Array(body.utf8)))
    }

    @Test(
        "a re-authentication by ID token whose replaced session cannot be ended answers no tokens and commits nothing: the retry ends the old session"
    )
    func idTokenReauthenticationEndsItsSessionInItsCommit() async throws {
        try await withDeployment { deployment in
            let signedIn = try await Self.postIDToken(deployment, "first", mode: "signin", bearer: nil)
            let idToken = try #require(try jsonObject(signedIn)["idToken"] as? String)
            let database = try openSQLite(deployment.databasePath)
            try await database.write {
                try $0.execute(sql: "CREATE TRIGGER keep_sessions BEFORE DELETE ON sessions BEGIN SELECT RAISE(ABORT, 'sessions are kept'); END")
            }
            let failed = try await Self.postIDToken(deployment, "second", mode: "reauthenticate", bearer: idToken)
            #expect(failed.status >= 500, "\(failed.status): \(failed.bodyText)")
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 200, "the caller's session goes on")
            try await database.write { try $0.execute(sql: "DROP TRIGGER keep_sessions") }
            let retried = try await Self.postIDToken(deployment, "third", mode: "reauthenticate", bearer: idToken)
            #expect(retried.status == 200, "\(retried.bodyText)")
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 401, "replaced in the sign-in's commit")
        }
    }

    @Test("a re-authentication by ID token that fails after its session was written leaves the caller's session: the retry succeeds")
    func failedReauthenticationKeepsTheCallersSession() async throws {
        try await withDeployment { deployment in
            func post(_ nonce: String, mode: String, bearer: String?) async throws -> OutboundResponse {
                try await Self.postIDToken(deployment, nonce, mode: mode, bearer: bearer)
            }
            let signedIn = try await post("first", mode: "signin", bearer: nil)
            let idToken = try #require(try jsonObject(signedIn)["idToken"] as? String)
            // The new session is written; its first refresh token is not.
            let database = try openSQLite(deployment.databasePath)
            try await database.write { try $0.execute(sql: "ALTER TABLE refresh_tokens RENAME TO refresh_tokens_away") }
            let failed = try await post("second", mode: "reauthenticate", bearer: idToken)
            #expect(failed.status >= 500, "\(failed.status): \(failed.bodyText)")
            try await database.write { try $0.execute(sql: "ALTER TABLE refresh_tokens_away RENAME TO refresh_tokens") }
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 200, "the caller's session goes on")
            let retried = try await post("third", mode: "reauthenticate", bearer: idToken)
            #expect(retried.status == 200, "\(retried.bodyText)")
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 401, "replaced once the new tokens were answered")
        }
    }

    @Test(
        "a provider's rotated tokens whose write fails are used, and written, by the next call: the spent refresh token is never sent again (GitHub App)"
    )
    func rotatedTokensSurviveAFailedWrite() async throws {
        try await withDeployment(gateway: UpstreamTrustTests.useGitHubApp) { deployment in
            var (browser, live, exchanges) = try await UpstreamTrustTests.gitHubAppSignIn(deployment)
            let afterSignIn = try await exchanges()
            // Writes of the grant's tokens fail (a broken disk, a lost connection) while GitHub
            // rotates them: it has spent the refresh token the store still holds.
            let database = try openSQLite(deployment.databasePath)
            try await database.write {
                try $0.execute(
                    sql:
                        "CREATE TRIGGER tokens_unwritable BEFORE UPDATE OF sealed_tokens ON provider_links BEGIN SELECT RAISE(ABORT, 'disk gone'); END"
                )
            }
            deployment.clock.advance(by: 28800 + 60)
            let during = try await browser.send(live)
            #expect(during.status == 200, "the rotated tokens serve the call: \(during.bodyText)")
            #expect(try await exchanges() == afterSignIn + 1)
            let holds = deployment.logs.lines.contains { $0.contains("provider tokens not written") }
            #expect(holds)
            try await database.write { try $0.execute(sql: "DROP TRIGGER tokens_unwritable") }

            // The next call uses the kept tokens and writes them; GitHub is not asked again.
            let after = try await browser.send(live)
            #expect(after.status == 200, "\(after.bodyText)")
            #expect(try await exchanges() == afterSignIn + 1)
            // Eight hours on, the stored (rotated) refresh token works.
            deployment.clock.advance(by: 28800 + 60)
            let later = try await browser.send(live)
            #expect(later.status == 200, "\(later.bodyText)")
            #expect(try await exchanges() == afterSignIn + 2)
        }
    }

    @Test("a store error while a pending credential is claimed leaves it claimable: the link and the claim commit together")
    func claimFailingLeavesThePendingCredential() async throws {
        try await withDeployment { deployment in
            var owner = Browser(deployment)
            let uid = try account(try await owner.complete(login: "sam-shared")).uid
            var newcomer = Browser(deployment)
            let refused = try await newcomer.complete(login: "sam@oidc.example", provider: "oidc.emulator")
            let pendingToken = try #require(try jsonObject(refused)["pendingToken"] as? String)
            _ = try await newcomer.complete(login: "sam-shared")
            // The links table goes away under the running gateway (as a broken disk or a lost
            // connection would fail the statement): the claim needs it.
            let database = try openSQLite(deployment.databasePath)
            try await database.write { try $0.execute(sql: "ALTER TABLE provider_links RENAME TO provider_links_away") }
            let failed = try await newcomer.json("/v1/auth/link", #"{"pendingToken":"\#(pendingToken)"}"#)
            #expect(failed.status >= 500, "\(failed.status): \(failed.bodyText)")
            try await database.write { try $0.execute(sql: "ALTER TABLE provider_links_away RENAME TO provider_links") }

            let linked = try await newcomer.json("/v1/auth/link", #"{"pendingToken":"\#(pendingToken)"}"#)
            #expect(linked.status == 200, "\(linked.bodyText)")
            #expect(try account(linked) == (uid, ["github.com", "oidc.emulator"]))
            let again = try await newcomer.json("/v1/auth/link", #"{"pendingToken":"\#(pendingToken)"}"#)
            #expect(try jsonObject(again)["code"] as? String == "invalid-pending-token", "consumed by the claim that succeeded")
        }
    }

    @Test(
        "a pool of three connections, three Microsoft users whose refreshes wait 8 s on the token endpoint: none answers 503, and a GitHub user's /v1/me answers 200 meanwhile"
    )
    func slowRefreshesDoNotStarveThePool() async throws {
        try await withDeployment(database: try await PostgresTestServer.freshDatabase(), databasePoolSize: 3) { deployment in
            var waiting: [Browser] = []
            for login in [MicrosoftSignInTests.adele, MicrosoftSignInTests.bob, MicrosoftSignInTests.steven] {
                var browser = Browser(deployment)
                #expect(try await MicrosoftSignInTests.signIn(&browser, login).status == 200)
                waiting.append(browser)
            }
            var bystander = Browser(deployment)
            #expect(try await bystander.complete(login: "octocat").status == 200)
            _ = try await deployment.control("microsoft/expire-tokens", "{}")
            _ = try await deployment.control("faults", #"{"endpoint": "POST /microsoft/common/oauth2/v2.0/token", "delayMs": 8000}"#)
            let refreshes = waiting.map { browser in
                Task {
                    try await deployment.client.execute(
                        OutboundRequest(url: "\(deployment.gatewayURL)/v1/me/providers/microsoft.com/profile", headers: browser.jar.header))
                }
            }
            // All three refreshes are at the provider (three sign-ins made three token calls before).
            var atProvider = false
            for _ in 0..<400 where !atProvider {
                atProvider = try await deployment.emulatorStats()["POST /microsoft/common/oauth2/v2.0/token"] ?? 0 >= 6
                if !atProvider { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(atProvider)
            // Meanwhile another user is served as usual: no connection is held across the calls.
            for _ in 0..<5 {
                let me = try await bystander.send("\(deployment.gatewayURL)/v1/me")
                #expect(me.status == 200, "\(me.status) \(me.bodyText)")
            }
            for refresh in refreshes {
                let answer = try await refresh.value
                #expect(answer.status == 200, "\(answer.status) \(answer.bodyText)")
            }
        }
    }

    @Test("a sign-in that stores new tokens while a refresh of the same identity is at the provider keeps its tokens")
    func aRefreshDoesNotOverwriteTokensStoredMeanwhile() async throws {
        // Microsoft's calls may take an hour: the held refresh ends when the test releases it.
        try await withDeployment(gateway: { $0.upstreamTimeouts["microsoft.com"] = .seconds(3600) }) { deployment in
            var browser = Browser(deployment)
            #expect(try await MicrosoftSignInTests.signIn(&browser, MicrosoftSignInTests.adele).status == 200)
            _ = try await deployment.control("microsoft/expire-tokens", "{}")
            // The next token call (the refresh) is held half-way through its answer until released;
            // the sign-in's own call after it is not.
            _ = try await deployment.control(
                "faults", #"{"endpoint": "POST /microsoft/common/oauth2/v2.0/token", "pauseBodyMs": 3600000, "times": 1}"#)
            let cookies = browser.jar.header
            let refresh = Task {
                try await deployment.client.execute(
                    OutboundRequest(url: "\(deployment.gatewayURL)/v1/me/providers/microsoft.com/profile", headers: cookies))
            }
            var atProvider = false
            for _ in 0..<400 where !atProvider {
                atProvider = try await deployment.emulatorStats()["POST /microsoft/common/oauth2/v2.0/token"] ?? 0 >= 2
                if !atProvider { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(atProvider)
            var again = Browser(deployment)
            #expect(try await MicrosoftSignInTests.signIn(&again, MicrosoftSignInTests.adele).status == 200)
            let database = try openSQLite(deployment.databasePath)
            let signedIn = try await database.read { try String.fetchOne($0, sql: "SELECT sealed_tokens FROM provider_links") }
            _ = try await deployment.control("faults/release", "{}")
            #expect(try await refresh.value.status == 200)
            let after = try await database.read { try String.fetchOne($0, sql: "SELECT sealed_tokens FROM provider_links") }
            #expect(after == signedIn, "the refresh replaced the tokens the sign-in stored meanwhile")
            #expect(
                try await ResilienceTests.metric(
                    deployment, "gatehouse_token_refreshes_total", ["provider": "microsoft.com", "outcome": "superseded"])
                    == 1)
        }
    }

    @Test(
        "a full disk answers 503 storage-unavailable with Retry-After (never 500), logs the condition and the folder, and sign-ins resume once space returns",
        .enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
    func fullDiskIsUnavailableNotAnError() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-full-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try await TestTools.run("mount", ["-t", "tmpfs", "-o", "size=8m", "tmpfs", folder])
        defer {
            try? TestTools.runBlocking("umount", ["-l", folder])
            try? FileManager.default.removeItem(atPath: folder)
        }
        try await withDeployment(dataFolder: folder) { deployment in
            var first = Browser(deployment)
            let signedIn = try await first.complete(login: "octocat")
            #expect(signedIn.status == 200)
            var refreshToken = try #require(try jsonObject(signedIn)["refreshToken"] as? String)
            // Fill the disk, 64 KiB at a time, until it refuses.
            let filler = folder + "/filler"
            #expect(FileManager.default.createFile(atPath: filler, contents: nil))
            let handle = try #require(FileHandle(forWritingAtPath: filler))
            let chunk = Data(count: 64 << 10)
            for _ in 0..<256 {
                do { try handle.write(contentsOf: chunk) } catch { break }
            }
            try? handle.close()

            // Sign-ins write (a transaction, an account, a session): each answer is a success
            // (SQLite may still have room in its WAL) or a 503, never a 500.
            var unavailable = 0
            for login in ["private-pat", "unverified-uma", "sam-shared", "octocat", "private-pat", "sam-shared"] {
                let answer = try await Self.attemptSignIn(deployment, login: login)
                #expect([200, 503].contains(answer.status), "\(login): \(answer.status) \(answer.bodyText)")
                if answer.status == 503 {
                    unavailable += 1
                    #expect(try jsonObject(answer)["code"] as? String == "storage-unavailable")
                    #expect(answer.headers["retry-after"] != nil)
                }
            }
            #expect(unavailable > 0, "a full disk refused no write")
            // A refresh's rotation writes too: its 503 says, for an OAuth client, that a retry
            // may succeed (RFC 6749's `error`), so the client keeps its refresh token.
            var refused: OutboundResponse?
            for _ in 0..<4 where refused == nil {
                let answer = try await GatewayTokenTests.refresh(deployment, refreshToken)
                #expect([200, 503].contains(answer.status), "\(answer.status) \(answer.bodyText)")
                if answer.status == 503 { refused = answer } else { refreshToken = try #require(try jsonObject(answer)["refreshToken"] as? String) }
            }
            let unrotated = try #require(refused, "a full disk refused no rotation")
            #expect(try jsonObject(unrotated)["code"] as? String == "storage-unavailable")
            #expect(try jsonObject(unrotated)["error"] as? String == "temporarily_unavailable", "\(unrotated.bodyText)")
            let holds = deployment.logs.lines.contains { $0.contains("storage unavailable") && $0.contains("disk full") && $0.contains(folder) }
            #expect(holds)
            // Readiness says so (reads still work, so the instance stays in rotation).
            let ready = try jsonObject(try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/readyz")))
            #expect(ready["storage"] as? String == "degraded")
            #expect((ready["storageProblem"] as? String)?.contains("disk full") == true, "\(ready)")

            try FileManager.default.removeItem(atPath: filler)
            let resumed = try await Self.attemptSignIn(deployment, login: "sam-shared")
            #expect(resumed.status == 200, "\(resumed.bodyText)")
            // A minute without refusals and readiness is plain "ok" again.
            deployment.clock.advance(by: 60)
            let recovered = try jsonObject(try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/readyz")))
            #expect(recovered["storage"] as? String == "ok" && recovered["storageProblem"] == nil, "\(recovered)")
        }
    }

    @Test("a corrupt or too-new profile snapshot is an operator-visible error on every read, never a silent gap or re-auth")
    func corruptProfileSnapshot() async throws {
        // The database is changed behind the gateway's back, which only its own writes (and a
        // shared store's change feed) tell its account cache about: the cache is off, so that
        // every read reaches the broken rows.
        try await withDeployment(gateway: { $0.accountCacheLifetime = 0 }) { deployment in
            var browser = Browser(deployment)
            _ = try await browser.complete(login: "octocat")
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me").status == 200)
            let database = try openSQLite(deployment.databasePath)
            for (broken, cause) in [
                (#"{"providerId":"github.com","federatedId":"#, "unreadable"),
                (#"{"version":99,"providerId":"github.com","federatedId":"583231","emailVerified":false,"rawUserInfo":null}"#, "version 99"),
                (#"{"providerId":"github.com","federatedId":"someone-else","emailVerified":false,"rawUserInfo":null}"#, "another identity"),
            ] {
                try await database.write { try $0.execute(sql: "UPDATE provider_links SET profile_json = ?", arguments: [Data(broken.utf8)]) }
                for path in ["/v1/me", "/v1/me/photo", "/v1/me/providers/github.com/profile"] {
                    let answer = try await browser.send("\(deployment.gatewayURL)\(path)")
                    #expect(answer.status == 500, "\(path) with \(cause): \(answer.status) \(answer.bodyText)")
                    #expect(try jsonObject(answer)["code"] as? String == "internal", "\(path) with \(cause)")
                }
                // The log names the row and why, so an operator can find it.
                let holds = deployment.logs.lines.contains { $0.contains("request failed") && $0.contains("profile snapshot") && $0.contains(cause) }
                #expect(
                    holds,
                    "\(cause)")
            }
        }
    }

    /// A GitHub sign-in step by step: the first answer that is not the next step's (start,
    /// callback), else the result's answer.
    static func attemptSignIn(_ deployment: TestDeployment, login: String) async throws -> OutboundResponse {
        var browser = Browser(deployment)
        let start = try await browser.start("return_to=\(FormEncoding.escape(TestDeployment.returnTo))&login=\(login)")
        guard start.status == 302, let authorize = start.headers["location"] else { return start }
        let approved = try await deployment.client.execute(OutboundRequest(url: authorize))
        let callbackURL = try #require(approved.headers["location"])
        let callback = try await browser.send(callbackURL)
        guard callback.status == 303, let location = callback.headers["location"], let range = location.range(of: "#gatehouse_result=") else {
            return callback
        }
        return try await browser.result(String(location[range.upperBound...]))
    }
}
