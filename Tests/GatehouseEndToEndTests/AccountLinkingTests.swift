import CurlClient
import Foundation
import GRDB
import GatehouseCore
import GatehouseTestSupport
import Testing

extension Browser {
    /// The whole flow in `mode`, then its one-time result.
    mutating func complete(login: String, provider: String = "github.com", mode: String = "signin") async throws -> OutboundResponse {
        try await result(try await signIn(login: login, provider: provider, mode: mode))
    }

    /// A JSON request to the gateway with this browser's cookies (and page origin).
    mutating func json(_ path: String, method: String = "POST", _ body: String) async throws -> OutboundResponse {
        try await send("\(deployment.gatewayURL)\(path)", method: method, headers: ["Content-Type": "application/json"], body: Array(body.utf8))
    }
}

/// The `uid` and provider ids of a result or profile answer.
func account(_ response: OutboundResponse) throws -> (uid: String, providers: [String]) {
    let object = try jsonObject(response)
    let user = (object["user"] as? [String: Any]) ?? object
    let providers = (user["providers"] as? [[String: Any]] ?? []).compactMap { $0["providerId"] as? String }
    return (try #require(user["uid"] as? String, "\(response.status): \(response.bodyText)"), providers)
}

/// Linking, one account per email, pending credentials, re-authentication, unlink, delete —
/// end to end through the emulator's real wire formats.
@Suite("Accounts: linking and one account per email")
struct AccountLinkingTests {
    @Test("link a second provider, then sign in with either to the same account; the ID token lists both identities")
    func linkAndSignInWithEither() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let first = try await browser.complete(login: "octocat")
            #expect(first.status == 200)
            let uid = try account(first).uid
            let linked = try await browser.complete(login: "AdeleV@contoso.example", provider: "microsoft.com", mode: "link")
            #expect(linked.status == 200, "\(linked.bodyText)")
            #expect(try jsonObject(linked)["operationType"] as? String == "link")
            #expect(try jsonObject(linked)["idToken"] == nil)
            #expect(try account(linked) == (uid, ["github.com", "microsoft.com"]))

            var other = Browser(deployment)
            let viaMicrosoft = try await other.complete(login: "AdeleV@contoso.example", provider: "microsoft.com")
            #expect(try account(viaMicrosoft).uid == uid)
            #expect(try jsonObject(viaMicrosoft)["isNewUser"] as? Bool == false)
            var third = Browser(deployment)
            let viaGitHub = try await third.complete(login: "octocat")
            #expect(try account(viaGitHub).uid == uid)
            #expect(try await deployment.accountCount() == 1)

            let idToken = try #require(try jsonObject(viaMicrosoft)["idToken"] as? String)
            let claims = try #require(
                try JSONSerialization.jsonObject(with: Base64URL.decode(String(idToken.split(separator: ".")[1])) ?? Data()) as? [String: Any])
            #expect(claims["sub"] as? String == uid)
            #expect(claims["sign_in_provider"] as? String == "microsoft.com")
            let identities = try #require(claims["identities"] as? [String: [String]])
            #expect(identities["github.com"] == ["583231"])
            #expect(identities["microsoft.com"]?.count == 1)
        }
    }

    @Test(
        "a verified email already in use: 409 with email and pendingToken, no second account; the owner links it; single use; others cannot claim it")
    func pendingCredentialRoundTrip() async throws {
        try await withDeployment { deployment in
            var owner = Browser(deployment)
            let uid = try account(try await owner.complete(login: "sam-shared")).uid

            var newcomer = Browser(deployment)
            let refused = try await newcomer.complete(login: "sam@oidc.example", provider: "oidc.emulator")
            #expect(refused.status == 409)
            let problem = try jsonObject(refused)
            #expect(problem["code"] as? String == "account-exists-with-different-credential")
            #expect(problem["email"] as? String == "Sam.Shared@Example.com")
            let pendingToken = try #require(problem["pendingToken"] as? String)
            #expect(try await deployment.accountCount() == 1)
            // The refused sign-in started no session.
            #expect(try await newcomer.send("\(deployment.gatewayURL)/v1/me").status == 401)

            // Someone else's account cannot claim it, and the attempt does not consume it.
            var stranger = Browser(deployment)
            _ = try await stranger.complete(login: "octocat")
            let mismatch = try await stranger.json("/v1/auth/link", #"{"pendingToken":"\#(pendingToken)"}"#)
            #expect(mismatch.status == 400)
            #expect(try jsonObject(mismatch)["code"] as? String == "user-mismatch")

            // The newcomer signs in with the existing provider, then links.
            _ = try await newcomer.complete(login: "sam-shared")
            let linked = try await newcomer.json("/v1/auth/link", #"{"pendingToken":"\#(pendingToken)"}"#)
            #expect(linked.status == 200, "\(linked.bodyText)")
            #expect(try account(linked) == (uid, ["github.com", "oidc.emulator"]))
            let again = try await newcomer.json("/v1/auth/link", #"{"pendingToken":"\#(pendingToken)"}"#)
            #expect(again.status == 400)
            #expect(try jsonObject(again)["code"] as? String == "invalid-pending-token")

            var later = Browser(deployment)
            #expect(try account(try await later.complete(login: "sam@oidc.example", provider: "oidc.emulator")).uid == uid)
            #expect(try await deployment.accountCount() == 2)
        }
    }

    @Test(
        "one verified address stays one account's: a link whose verified email is another account's is refused (409 email-already-in-use) and writes nothing; an identity whose provider later reports it keeps it unverified"
    )
    func linkCannotTakeAnotherAccountsEmail() async throws {
        try await withDeployment { deployment in
            var owner = Browser(deployment)
            #expect(try await owner.complete(login: "sam-shared").status == 200)  // GitHub: sam.shared@example.com, verified
            var other = Browser(deployment)
            let otherUID = try account(try await other.complete(login: "yuki@yahoo.example", provider: "yahoo.com")).uid
            let links = try await NativeAppTests.rows(deployment, "provider_links")
            let linked = try await other.complete(login: "sam@oidc.example", provider: "oidc.emulator", mode: "link")
            #expect(linked.status == 409, "\(linked.bodyText)")
            let problem = try jsonObject(linked)
            #expect(
                problem["code"] as? String == "email-already-in-use" && (problem["email"] as? String)?.lowercased() == "sam.shared@example.com",
                "\(problem)")
            #expect(try await NativeAppTests.rows(deployment, "provider_links") == links)
            let holders = try await openSQLite(deployment.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT uid FROM provider_links WHERE verified_email = 'sam.shared@example.com'")
            }
            #expect(holders.count == 1 && !holders.contains(otherUID))

            // Olive's provider now reports Sam's address as verified: her link keeps it unverified.
            var olive = Browser(deployment)
            #expect(try await olive.complete(login: "olive@oidc.example", provider: "oidc.emulator").status == 200)
            _ = try await deployment.control(
                "faults",
                #"{"endpoint": "GET /oidc/userinfo", "status": 200, "headers": {"Content-Type": "application/json"}, "body": "{\"sub\": \"248289761001\", \"email\": \"sam.shared@example.com\", \"email_verified\": true, \"name\": \"Olive Oidc\"}", "times": 1}"#
            )
            let live = try await olive.send("\(deployment.gatewayURL)/v1/me/providers/oidc.emulator/profile?refresh=true")
            #expect(live.status == 200, "\(live.bodyText)")
            let after = try await openSQLite(deployment.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT uid FROM provider_links WHERE verified_email = 'sam.shared@example.com'")
            }
            #expect(after == holders, "\(after)")
        }
    }

    @Test("a pending credential claimed twice at once links once: the claim held at its hook while the other links is 400 invalid-pending-token")
    func pendingCredentialClaimedTwiceAtOnce() async throws {
        try await withDeployment(hooks: HookTests.sampleApp(timeout: 10)) { deployment in
            var owner = Browser(deployment)
            #expect(try await owner.complete(login: "sam-shared").status == 200)
            var newcomer = Browser(deployment)
            let refused = try await newcomer.complete(login: "sam@oidc.example", provider: "oidc.emulator")
            let pendingToken = try #require(try jsonObject(refused)["pendingToken"] as? String)
            #expect(try await owner.complete(login: "sam-shared").status == 200, "a sign-in after the credential was parked")
            let claimer = owner
            @Sendable func claim() async throws -> OutboundResponse {
                var browser = claimer
                return try await browser.json("/v1/auth/link", #"{"pendingToken":"\#(pendingToken)"}"#)
            }
            // The first claim waits at its hook (at most 9.5 s) while the second links.
            let held = try await deployment.holdingHook("POST /sample-app/hooks/before-sign-in", milliseconds: 9500) { try await claim() }
            defer { held.cancel() }
            let second = try await claim()
            #expect(second.status == 200, "\(second.bodyText)")
            _ = try await deployment.control("faults/release", "{}")
            let first = try await held.value
            #expect(first.status == 400, "\(first.bodyText)")
            #expect(try jsonObject(first)["code"] as? String == "invalid-pending-token")
            let links = try await openSQLite(deployment.databasePath).read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM provider_links WHERE provider_id = 'oidc.emulator'") ?? -1
            }
            #expect(links == 1)
        }
    }

    @Test(
        "two first sign-ins with one verified address at once: the one held at its before-create hook while the other creates its account is 409 account-exists-with-different-credential, and one account exists"
    )
    func oneAddressTwoFirstSignInsAtOnce() async throws {
        try await withDeployment(hooks: HookTests.sampleApp(timeout: 10)) { deployment in
            // GitHub's sign-in passed every check (no account holds the address yet) and waits for
            // its hook, held until released (at most 9.5 s, within the hook's 10 s timeout).
            let github = try await deployment.holdingHook("POST /sample-app/hooks/before-create", milliseconds: 9500) {
                var browser = Browser(deployment)
                return try await browser.complete(login: "sam-shared")
            }
            defer { github.cancel() }
            // Meanwhile the OpenID identity with the same verified address creates its account.
            var openID = Browser(deployment)
            let created = try await openID.complete(login: "sam@oidc.example", provider: "oidc.emulator")
            _ = try await deployment.control("faults/release", "{}")
            let held = try await github.value
            // One is created and one refused, told the address has an account. On a machine too
            // loaded to finish the other sign-in within the hold, the held one may have won, or
            // its hook call may have timed out (503 hook-unavailable, nothing stored): never two
            // accounts.
            let (winner, loser) = created.status == 200 ? (created, held) : (held, created)
            #expect(winner.status == 200, "\(winner.bodyText)")
            let refusal = try jsonObject(loser)["code"] as? String
            #expect(refusal == "account-exists-with-different-credential" || refusal == "hook-unavailable", "\(loser.bodyText)")
            #expect(try await deployment.accountCount() == 1)
        }
    }

    @Test(
        "a returning sign-in whose provider now reports a verified address, held at its before-sign-in hook while another identity creates an account with that address, keeps it unverified: one account holds it"
    )
    func returningSignInRacingAnAccountForItsAddress() async throws {
        try await withDeployment(hooks: HookTests.sampleApp(timeout: 10)) { deployment in
            var olive = Browser(deployment)
            #expect(try await olive.complete(login: "olive@oidc.example", provider: "oidc.emulator").status == 200)
            // Olive's provider now reports Sam's address as verified; her next sign-in reads that
            // no account holds it and waits for its hook, held until released (at most 9.5 s).
            _ = try await deployment.control(
                "faults",
                #"{"endpoint": "GET /oidc/userinfo", "status": 200, "headers": {"Content-Type": "application/json"}, "body": "{\"sub\": \"248289761001\", \"email\": \"sam.shared@example.com\", \"email_verified\": true, \"name\": \"Olive Oidc\"}", "times": 1}"#
            )
            let returning = try await deployment.holdingHook("POST /sample-app/hooks/before-sign-in", milliseconds: 9500) {
                var browser = Browser(deployment)
                return try await browser.complete(login: "olive@oidc.example", provider: "oidc.emulator")
            }
            defer { returning.cancel() }
            // Meanwhile Sam's GitHub identity, with that address verified, creates its account.
            var sam = Browser(deployment)
            let created = try await sam.complete(login: "sam-shared")
            _ = try await deployment.control("faults/release", "{}")
            let signedIn = try await returning.value
            // On a machine too loaded to finish Sam's sign-in within the hold, Olive's may have
            // written first (Sam's is then refused, 409) or timed out at its hook (503, nothing
            // stored): whichever way, one account holds the address verified.
            #expect([200, 409].contains(created.status), "\(created.bodyText)")
            #expect([200, 503].contains(signedIn.status), "\(signedIn.bodyText)")
            let holders = try await openSQLite(deployment.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT DISTINCT uid FROM provider_links WHERE verified_email = 'sam.shared@example.com'")
            }
            #expect(holders.count == 1, "\(holders)")
        }
    }

    @Test("an unverified email never matches an account nor triggers the 409; with the setting off a second account is created")
    func unverifiedAndSettingOff() async throws {
        try await withDeployment { deployment in
            var first = Browser(deployment)
            let uid = try account(try await first.complete(login: "sam-shared")).uid
            var unverified = Browser(deployment)
            let yahoo = try await unverified.complete(login: "sam@yahoo.example", provider: "yahoo.com")
            #expect(yahoo.status == 200, "\(yahoo.bodyText)")
            #expect(try jsonObject(yahoo)["isNewUser"] as? Bool == true)
            #expect(try account(yahoo).uid != uid)

            try await withDeployment(gateway: { $0.oneAccountPerEmail = false }) { relaxed in
                var a = Browser(relaxed)
                var b = Browser(relaxed)
                let github = try account(try await a.complete(login: "sam-shared")).uid
                let oidc = try await b.complete(login: "sam@oidc.example", provider: "oidc.emulator")
                #expect(oidc.status == 200)
                #expect(try account(oidc).uid != github)
                #expect(try await relaxed.accountCount() == 2)
            }
        }
    }

    @Test(
        "link conflicts: the identity on another account → credential-already-in-use with a pendingToken; another identity of the provider → provider-already-linked"
    )
    func linkConflicts() async throws {
        try await withDeployment { deployment in
            var octo = Browser(deployment)
            let octoUid = try account(try await octo.complete(login: "octocat")).uid
            var pat = Browser(deployment)
            _ = try await pat.complete(login: "olive@oidc.example", provider: "oidc.emulator")

            let taken = try await pat.complete(login: "octocat", mode: "link")
            #expect(taken.status == 409)
            #expect(try jsonObject(taken)["code"] as? String == "credential-already-in-use")
            let pending = try #require(try jsonObject(taken)["pendingToken"] as? String)
            // The pending token belongs to the account holding the identity: refused elsewhere
            // (without being used up), accepted there, where the link keeps the newer of its
            // grant and the parked one.
            let elsewhere = try await pat.json("/v1/auth/link", #"{"pendingToken":"\#(pending)"}"#)
            #expect(try jsonObject(elsewhere)["code"] as? String == "user-mismatch")
            // A session older than the pending credential cannot claim it (a stolen session
            // must not collect it): the owner signs in again first; it is still there then.
            let stale = try await octo.json("/v1/auth/link", #"{"pendingToken":"\#(pending)"}"#)
            #expect(stale.status == 401)
            #expect(try jsonObject(stale)["code"] as? String == "requires-recent-login")
            #expect(try await octo.complete(login: "octocat").status == 200)
            let claimed = try await octo.json("/v1/auth/link", #"{"pendingToken":"\#(pending)"}"#)
            #expect(claimed.status == 200, "\(claimed.bodyText)")
            #expect(try account(claimed) == (octoUid, ["github.com"]))

            let second = try await octo.complete(login: "private-pat", mode: "link")
            #expect(second.status == 409)
            #expect(try jsonObject(second)["code"] as? String == "provider-already-linked")
            #expect(try account(try await octo.send("\(deployment.gatewayURL)/v1/me")) == (octoUid, ["github.com"]))
            // Linking without being signed in is refused at start.
            var anonymous = Browser(deployment)
            let start = try await anonymous.start("return_to=\(FormEncoding.escape(TestDeployment.returnTo))&mode=link")
            #expect(start.status == 401)
        }
    }

    @Test("two simultaneous links of one identity to two accounts: one wins, the other gets credential-already-in-use")
    func concurrentLinks() async throws {
        try await withDeployment { deployment in
            var a = Browser(deployment)
            var b = Browser(deployment)
            _ = try await a.complete(login: "octocat")
            _ = try await b.complete(login: "private-pat")
            let callbackA = try await a.authorize(login: "olive@oidc.example", provider: "oidc.emulator", mode: "link")
            let callbackB = try await b.authorize(login: "olive@oidc.example", provider: "oidc.emulator", mode: "link")
            let pairs = [(a, callbackA), (b, callbackB)]
            let codes = try await withThrowingTaskGroup(of: String.self) { group in
                for (browser, callback) in pairs {
                    group.addTask {
                        var browser = browser
                        let location = try #require(try await browser.send(callback).headers["location"])
                        let marker = try #require(location.range(of: "#gatehouse_result="))
                        let result = try await browser.result(String(location[marker.upperBound...]))
                        return result.status == 200 ? "linked" : (try jsonObject(result)["code"] as? String ?? "?")
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(codes.sorted() == ["credential-already-in-use", "linked"])
        }
    }

    /// Runs octocat's GitHub re-authentication from a page holding only `bearer` (no cookie),
    /// bound to a fresh result key of `page`'s, up to its callback; the result's id.
    static func reauthenticate(_ deployment: TestDeployment, _ page: inout Browser, bearer: String) async throws -> String {
        page.resultKey = ResultKey()
        let returnTo = FormEncoding.escape(TestDeployment.returnTo)
        let start = try await page.send(
            "\(deployment.gatewayURL)/v1/auth/github.com/start?return_to=\(returnTo)&login=octocat&mode=reauthenticate&result_challenge=\(page.resultKey.challenge)",
            headers: ["Authorization": "Bearer \(bearer)", "Referer": "https://app.example.com/"])
        #expect(start.status == 302, "\(start.status): \(start.bodyText)")
        let approved = try await deployment.client.execute(OutboundRequest(url: try #require(start.headers["location"])))
        let callback = try await page.send(try #require(approved.headers["location"]))
        let location = try #require(callback.headers["location"])
        return String(location[try #require(location.range(of: "#gatehouse_result=")).upperBound...])
    }

    @Test("a page's re-authentication started with its bearer token replaces that session once the page redeems the result")
    func bearerStartedReauthenticationReplacesItsSession() async throws {
        try await withDeployment { deployment in
            var signIn = Browser(deployment)
            let first = try await signIn.result(try await signIn.signIn(login: "octocat"))
            let (idToken, refreshToken) = (
                try #require(try jsonObject(first)["idToken"] as? String), try #require(try jsonObject(first)["refreshToken"] as? String)
            )
            // A page holding only the gateway's tokens (no cookie) starts the re-authentication.
            var page = Browser(deployment)
            let resultID = try await Self.reauthenticate(deployment, &page, bearer: idToken)
            // Until the page redeems the result, its session goes on.
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 200)
            let redeemed = try await page.result(resultID)
            #expect(redeemed.status == 200, "\(redeemed.bodyText)")
            #expect(try jsonObject(redeemed)["operationType"] as? String == "reauthenticate")
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 401)
            #expect(try await GatewayTokenTests.refresh(deployment, refreshToken).status == 400)
        }
    }

    @Test("unlinking an identity ends the sessions that signed in with it, the caller's own excepted")
    func unlinkEndsItsSessions() async throws {
        try await withDeployment { deployment in
            var owner = Browser(deployment)
            let uid = try account(try await owner.complete(login: "octocat")).uid
            #expect(try await owner.complete(login: "olive@oidc.example", provider: "oidc.emulator", mode: "link").status == 200)
            // Someone signed in with the linked identity (the one a thief linked, say).
            var other = Browser(deployment)
            #expect(try account(try await other.complete(login: "olive@oidc.example", provider: "oidc.emulator")).uid == uid)
            // And the owner's second device, also signed in with it.
            var device = Browser(deployment)
            #expect(try await device.complete(login: "olive@oidc.example", provider: "oidc.emulator").status == 200)
            let me = "\(deployment.gatewayURL)/v1/me"
            #expect(try await other.send(me).status == 200)
            // Unlinked from the device signed in with it: its own session goes on.
            let unlinked = try await device.send("\(deployment.gatewayURL)/v1/me/providers/oidc.emulator", method: "DELETE")
            #expect(unlinked.status == 200, "\(unlinked.bodyText)")
            #expect(try await other.send(me).status == 401)
            #expect(try await device.send(me).status == 200)
            #expect(try await owner.send(me).status == 200, "a session of another provider goes on")
        }
    }

    @Test(
        "re-authenticate: another identity → user-mismatch; after the window unlink and delete need it; last provider stays; delete revokes GitHub's grant"
    )
    func reauthenticateUnlinkDelete() async throws {
        try await withDeployment(gateway: { $0.recentLoginWindow = 60 }) { deployment in
            var browser = Browser(deployment)
            let uid = try account(try await browser.complete(login: "octocat")).uid
            _ = try await browser.complete(login: "olive@oidc.example", provider: "oidc.emulator", mode: "link")
            deployment.clock.advance(by: 61)
            let stale = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/oidc.emulator", method: "DELETE")
            #expect(stale.status == 401)
            #expect(try jsonObject(stale)["code"] as? String == "requires-recent-login")
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me", method: "DELETE").status == 401)

            let wrong = try await browser.complete(login: "private-pat", mode: "reauthenticate")
            #expect(wrong.status == 400)
            #expect(try jsonObject(wrong)["code"] as? String == "user-mismatch")
            let notLinked = try await browser.start(
                "return_to=\(FormEncoding.escape(TestDeployment.returnTo))&mode=reauthenticate", provider: "yahoo.com")
            #expect(notLinked.status == 404)

            let fresh = try await browser.complete(login: "octocat", mode: "reauthenticate")
            #expect(fresh.status == 200, "\(fresh.bodyText)")
            #expect(try jsonObject(fresh)["operationType"] as? String == "reauthenticate")
            #expect(try account(fresh).uid == uid)
            let unlinked = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/oidc.emulator", method: "DELETE")
            #expect(unlinked.status == 200, "\(unlinked.bodyText)")
            #expect(try account(unlinked).providers == ["github.com"])
            let last = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/github.com", method: "DELETE")
            #expect(last.status == 400)
            #expect(try jsonObject(last)["code"] as? String == "operation-not-allowed")

            let grantPath = "DELETE /github-api/applications/\(TestDeployment.githubClient.id)/grant"
            let revocationsBefore = try await deployment.emulatorStats()[grantPath] ?? 0
            let deleted = try await browser.send("\(deployment.gatewayURL)/v1/me", method: "DELETE")
            #expect(deleted.status == 204)
            #expect(try await deployment.emulatorStats()[grantPath] == revocationsBefore + 1)
            #expect(try await deployment.accountCount() == 0)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me").status == 401)
            // Signing in again makes a new account.
            var again = Browser(deployment)
            let reborn = try await again.complete(login: "octocat")
            #expect(try jsonObject(reborn)["isNewUser"] as? Bool == true)
            #expect(try account(reborn).uid != uid)
        }
    }

    @Test("sign-in methods by email: off by default (404), on: the providers of the verified address, normalized")
    func signInMethods() async throws {
        try await withDeployment { off in
            var browser = Browser(off)
            let closed = try await browser.send("\(off.gatewayURL)/v1/auth/methods?email=sam.shared%40example.com")
            #expect(closed.status == 404)
            #expect(try jsonObject(closed)["code"] as? String == "operation-not-allowed")

            try await withDeployment(gateway: { $0.signInMethodsLookup = true }) { on in
                var user = Browser(on)
                _ = try await user.complete(login: "sam-shared")
                let methods = try await user.send("\(on.gatewayURL)/v1/auth/methods?email=%20SAM.Shared%40example.COM")
                #expect(try jsonObject(methods)["signInMethods"] as? [String] == ["github.com"])
                let lookalike = try await user.send("\(on.gatewayURL)/v1/auth/methods?email=sam.shared%40example.com%40evil.example")
                #expect(lookalike.status == 400)
                let unknown = try await user.send("\(on.gatewayURL)/v1/auth/methods?email=nobody%40example.com")
                #expect(try jsonObject(unknown)["signInMethods"] as? [String] == [])
            }
        }
    }

    @Test("20 simultaneous first sign-ins of one identity create exactly one account")
    func concurrentFirstSignIns() async throws {
        try await HeavyTests.gate.exclusive {
            // Twenty token exchanges at once against the in-process emulator, whose RSA signing
            // runs unoptimized in the debug build: on a loaded 2-core run some waited past the
            // tests' 25 s upstream timeout. The race under test is the account's creation.
            try await withDeployment(gateway: { $0.defaultUpstreamTimeout = .seconds(90) }) { deployment in
                let uids = try await withThrowingTaskGroup(of: String.self) { group in
                    for _ in 0..<20 {
                        group.addTask {
                            var browser = Browser(deployment)
                            return try account(try await browser.complete(login: "olive@oidc.example", provider: "oidc.emulator")).uid
                        }
                    }
                    return try await group.reduce(into: Set<String>()) { $0.insert($1) }
                }
                #expect(uids.count == 1)
                #expect(try await deployment.accountCount() == 1)
            }
        }
    }
}
