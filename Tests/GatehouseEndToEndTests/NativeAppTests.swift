import CurlClient
import Foundation
import GRDB
import GatehouseCore
import GatehouseTestSupport
import Synchronization
import Testing

extension Browser {
    /// The provider's approval at `authorize` (the emulator's, at once), then this browser at
    /// the callback.
    mutating func follow(_ authorize: String) async throws -> OutboundResponse {
        let approved = try await deployment.client.execute(OutboundRequest(url: authorize))
        return try await send(try #require(approved.headers["location"], "\(approved.status) \(approved.bodyText)"))
    }

    /// Posts `decision` (`continue` or `cancel`) from the consent page `page`, as its form does.
    mutating func answerConsent(_ page: OutboundResponse, decision: String, origin: String? = nil) async throws -> OutboundResponse {
        let token = try #require(NativeAppTests.consentToken(page), "no consent form in \(page.status): \(page.bodyText)")
        return try await send(
            "\(deployment.gatewayURL)/v1/auth/consent", method: "POST",
            headers: ["Content-Type": "application/x-www-form-urlencoded", "Origin": origin ?? deployment.gatewayURL],
            body: Array("consent=\(FormEncoding.escape(token))&decision=\(decision)".utf8))
    }
}

/// Issue #23: native and desktop apps get their result through their own URL scheme or a
/// loopback port (RFC 8252), always bound to a verifier, never with a session cookie.
@Suite("Native and desktop apps")
struct NativeAppTests {
    static let scheme = "com.example.app:/oauth2redirect"
    static let loopback = "http://127.0.0.1/callback"

    /// The one-time token of a consent page's form.
    static func consentToken(_ page: OutboundResponse) -> String? {
        let text = page.bodyText
        guard let start = text.range(of: #"name="consent" value=""#) else { return nil }
        return String(text[start.upperBound...].prefix { $0 != "\"" })
    }

    /// Counts rows of `table` in the deployment's SQLite file.
    static func rows(_ deployment: TestDeployment, _ table: String) async throws -> Int {
        try await openSQLite(deployment.databasePath).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? -1 }
    }

    /// A deployment whose allow-list also has the sample app's addresses; binding is off for
    /// web returns, so the tests show native returns need it regardless.
    static func withNativeDeployment(
        hooks: (@Sendable (_ emulatorURL: String) -> HookConfiguration)? = nil, _ body: (TestDeployment) async throws -> Void
    ) async throws {
        try await withDeployment(
            gateway: {
                $0.returnToAllowList += [scheme, loopback]
                $0.appNames = [scheme: "Example <b>App</b>"]
                $0.requireResultBinding = false
            }, hooks: hooks
        ) { try await body($0) }
    }

    /// start → emulator → callback for `returnTo`, then Continue on the consent page an app's
    /// return stops at; the last answer.
    static func callback(_ browser: inout Browser, returnTo: String, provider: String = "github.com") async throws -> OutboundResponse {
        let page = try await consentPage(&browser, returnTo: returnTo, provider: provider)
        guard page.status == 200 else { return page }
        return try await browser.answerConsent(page, decision: "continue")
    }

    /// start → emulator → callback for `returnTo`; the callback's answer (the consent page for
    /// an app's return).
    static func consentPage(_ browser: inout Browser, returnTo: String, provider: String = "github.com", login: String? = nil) async throws
        -> OutboundResponse
    {
        // The emulator approves at once for its hint parameter (GitHub's `login`, others' `login_hint`).
        let hint =
            provider == "github.com"
            ? "login=\(login ?? "octocat")" : "login_hint=\(FormEncoding.escape(login ?? MicrosoftSignInTests.adele))"
        let start = try await browser.start("return_to=\(FormEncoding.escape(returnTo))&\(hint)", provider: provider)
        guard start.status == 302, let authorize = start.headers["location"] else { return start }
        return try await browser.follow(authorize)
    }

    /// Whether the answer sets a session cookie.
    static func setsSession(_ response: OutboundResponse) -> Bool {
        response.headers.values("set-cookie").contains {
            ($0.hasPrefix("gatehouse-session=") || $0.hasPrefix("__Host-gatehouse-session=")) && !$0.contains("Max-Age=0")
        }
    }

    @Test("a private-use scheme: 303 to com.example.app:/oauth2redirect#gatehouse_result=…, no cookie; only the right verifier redeems")
    func privateUseScheme() async throws {
        try await Self.withNativeDeployment { deployment in
            for provider in ["github.com", "microsoft.com"] {
                var browser = Browser(deployment)
                let callback = try await Self.callback(&browser, returnTo: Self.scheme, provider: provider)
                #expect(callback.status == 303, "\(provider): \(callback.bodyText)")
                let location = try #require(callback.headers["location"])
                #expect(location.hasPrefix("\(Self.scheme)#gatehouse_result="), "\(location)")
                #expect(!Self.setsSession(callback), "no session cookie: \(callback.headers.values("set-cookie"))")
                let id = Self.resultID(location)

                // Without the verifier, or with another one: nothing, and the result survives.
                let bare = try await Self.redeem(deployment, #"{"result":"\#(id)"}"#)
                #expect(bare.status == 404 || bare.status == 400, "\(bare.status) \(bare.bodyText)")
                let wrong = try await Self.redeem(deployment, #"{"result":"\#(id)","result_verifier":"\#(ResultKey().verifier)"}"#)
                #expect(wrong.status == 404)
                // The id joined to the start's challenge (public: it is in the start URL), where a
                // bound result's key was the digest of that text: nothing either.
                let joined = try await Self.redeem(deployment, #"{"result":"\#(id)|\#(browser.resultKey.challenge)"}"#)
                #expect(joined.status == 404, "\(joined.status) \(joined.bodyText)")
                // The app holds the verifier: tokens.
                let redeemed = try await browser.result(id)
                #expect(redeemed.status == 200, "\(redeemed.bodyText)")
                let answer = try jsonObject(redeemed)
                #expect(answer["idToken"] is String && answer["refreshToken"] is String)
            }
        }
    }

    @Test("a native start without result_challenge is refused although binding is off for web returns")
    func bindingIsMandatory() async throws {
        try await Self.withNativeDeployment { deployment in
            for returnTo in [Self.scheme, "http://127.0.0.1:51234/callback"] {
                var browser = Browser(deployment)
                let start = try await browser.send(
                    "\(deployment.gatewayURL)/v1/auth/github.com/start?return_to=\(FormEncoding.escape(returnTo))&login=octocat")
                #expect(start.status == 400, "\(returnTo)")
                #expect(try jsonObject(start)["code"] as? String == "invalid-argument")
                #expect((try jsonObject(start)["detail"] as? String)?.contains("result_challenge") == true)
            }
            // The web return of the same deployment still works unbound (binding off).
            var web = Browser(deployment)
            let start = try await web.send(
                "\(deployment.gatewayURL)/v1/auth/github.com/start?return_to=\(FormEncoding.escape(TestDeployment.returnTo))&login=octocat")
            #expect(start.status == 302)
        }
    }

    @Test("a desktop loopback return on any port of 127.0.0.1 is accepted; another host or a longer path is refused")
    func loopbackPorts() async throws {
        try await Self.withNativeDeployment { deployment in
            var browser = Browser(deployment)
            let callback = try await Self.callback(&browser, returnTo: "http://127.0.0.1:53124/callback")
            #expect(callback.status == 303)
            // In the query: the app's listener reads the request, which never carries a fragment;
            // in the fragment too, for a page the listener serves.
            let location = try #require(callback.headers["location"])
            let id = Self.resultID(location)
            #expect(location == "http://127.0.0.1:53124/callback?gatehouse_result=\(id)#gatehouse_result=\(id)" && !id.isEmpty, "\(location)")
            #expect(!Self.setsSession(callback))
            for refused in [
                "http://10.0.0.5:53124/callback", "http://localhost:53124/callback", "http://127.0.0.1:53124/callbackx",
                "https://127.0.0.1:53124/callback", "myapp://auth", "javascript:alert(1)", "data:text/html,x", "file:///etc/passwd",
                "blob:https://app.example.com/x", "com.example.app://user@host/oauth2redirect",
            ] {
                var other = Browser(deployment)
                let start = try await other.start("return_to=\(FormEncoding.escape(refused))&login=octocat")
                #expect(start.status == 400, "\(refused)")
                #expect(try jsonObject(start)["code"] as? String == "invalid-return-to", "\(refused)")
            }
        }
    }

    @Test("a web return keeps its session cookie")
    func webReturnKeepsCookie() async throws {
        try await Self.withNativeDeployment { deployment in
            var browser = Browser(deployment)
            let callback = try await Self.callback(&browser, returnTo: TestDeployment.returnTo)
            #expect(callback.status == 303)
            #expect(Self.setsSession(callback))
        }
    }

    @Test(
        "an app's return stops at the gateway's consent page naming the app and the account: nothing is stored before Continue; Cancel stores nothing and the app gets 403 sign-in-cancelled; the page's token works once, from its own browser and origin"
    )
    func consentBeforeAnAppGetsTheSignIn() async throws {
        try await Self.withNativeDeployment { deployment in
            for returnTo in [Self.scheme, "http://127.0.0.1:53124/callback"] {
                var browser = Browser(deployment)
                let page = try await Self.consentPage(&browser, returnTo: returnTo)
                #expect(page.status == 200, "\(page.bodyText)")
                #expect(page.headers["content-type"] == "text/html; charset=utf-8")
                #expect(page.headers["content-security-policy"]?.contains("frame-ancestors 'none'") == true)
                #expect(page.headers["x-frame-options"] == "DENY" && page.headers["cache-control"] == "no-store")
                // Not the sign-in routes' no-referrer, under which browsers post the form with `Origin: null`.
                #expect(page.headers["referrer-policy"] == "strict-origin")
                // The transaction cookie the answer needs lives as long as the page may be answered.
                let renewed = page.headers.values("set-cookie").first { $0.hasPrefix("gatehouse-tx=") }
                #expect(renewed?.contains("Max-Age=600") == true, "\(page.headers)")
                #expect(!Self.setsSession(page))
                #expect(page.bodyText.contains("octocat@github.example") || page.bodyText.contains("octocat"), "\(page.bodyText)")
                if returnTo == Self.scheme {
                    // The registered display name, escaped, with the address it stands for.
                    #expect(page.bodyText.contains("Example &lt;b&gt;App&lt;/b&gt;") && !page.bodyText.contains("<b>App</b>"))
                }
                #expect(page.bodyText.contains(returnTo))
                // The name is what the app's address is registered as, not a proof: the page says
                // who could be listening there.
                let caution =
                    returnTo == Self.scheme
                    ? "Any app on this device can register <code>com.example.app:</code>"
                    : "Any program on this computer can listen at <code>http://127.0.0.1:53124</code>"
                #expect(page.bodyText.contains(caution), "\(page.bodyText)")
                // The provider answered, but nothing is written until the user says so.
                #expect(try await deployment.accountCount() == 0)
                #expect(try await Self.rows(deployment, "sessions") == 0)

                // Another site's form, or another browser with the same token: refused.
                var stranger = Browser(deployment)
                stranger.jar = CookieJar()
                let foreign = try await browser.answerConsent(page, decision: "continue", origin: "https://evil.example")
                try #expect(foreign.status == 403 && (try jsonObject(foreign)["code"] as? String) == "origin-not-allowed")
                let elsewhere = try await stranger.answerConsent(page, decision: "continue")
                try #expect(elsewhere.status == 400 && (try jsonObject(elsewhere)["code"] as? String) == "invalid-state")

                let cancelled = try await browser.answerConsent(page, decision: "cancel")
                #expect(cancelled.status == 303)
                let location = try #require(cancelled.headers["location"])
                #expect(location.hasPrefix("\(returnTo)\(returnTo == Self.scheme ? "#" : "?")gatehouse_result="), "\(location)")
                let refused = try await browser.result(Self.resultID(location))
                try #expect(refused.status == 403 && (try jsonObject(refused)["code"] as? String) == "sign-in-cancelled", "\(refused.bodyText)")
                #expect(try await deployment.accountCount() == 0)
                #expect(try await Self.rows(deployment, "sessions") == 0)
                // Answered once.
                let again = try await browser.answerConsent(page, decision: "continue")
                try #expect(again.status == 400 && (try jsonObject(again)["code"] as? String) == "invalid-state")
            }
            // Continue: the account and the session exist now, and the app redeems its tokens.
            var browser = Browser(deployment)
            let continued = try await Self.callback(&browser, returnTo: Self.scheme)
            #expect(continued.status == 303)
            let location = try #require(continued.headers["location"])
            let redeemed = try await browser.result(Self.resultID(location))
            try #expect(redeemed.status == 200 && (try jsonObject(redeemed)["idToken"] as? String) != nil, "\(redeemed.bodyText)")
            #expect(try await deployment.accountCount() == 1)
            // A web return goes on without the page.
            var web = Browser(deployment)
            #expect(try await Self.callback(&web, returnTo: TestDeployment.returnTo).status == 303)
        }
    }

    @Test(
        "a held link the app redeems for an identity another account holds is refused then, once (409 credential-already-in-use, then 404), and links nothing"
    )
    func heldLinkRefusedAtRedemption() async throws {
        try await Self.withNativeDeployment { deployment in
            var other = Browser(deployment)
            #expect(try await other.complete(login: "olive@oidc.example", provider: "oidc.emulator").status == 200)
            let tokens = try await Self.appSignIn(deployment)
            let idToken = try #require(tokens["idToken"] as? String)

            let key = ResultKey()
            let made = try await Self.oliveLinkStart(deployment, idToken: idToken, challenge: key.challenge)
            let resultID = try await Self.continueInBrowser(deployment, startURL: made)
            let links = try await Self.rows(deployment, "provider_links")
            func redeem() async throws -> OutboundResponse {
                try await Self.redeem(deployment, #"{"result":"\#(resultID)","result_verifier":"\#(key.verifier)","confirm_link":true}"#)
            }
            let refused = try await redeem()
            #expect(refused.status == 409, "\(refused.bodyText)")
            #expect(try jsonObject(refused)["code"] as? String == "credential-already-in-use")
            #expect(try await redeem().status == 404)
            #expect(try await Self.rows(deployment, "provider_links") == links)
        }
    }

    @Test(
        "a held link waits for its app's answer up to ten minutes: confirm_link must be a boolean (null is none), the identity is named with whether its email is verified; false cancels (a loopback's and a scheme's)"
    )
    func heldLinkAnswers() async throws {
        try await Self.withNativeDeployment { deployment in
            let tokens = try await Self.appSignIn(deployment)
            let idToken = try #require(tokens["idToken"] as? String)
            let (resultID, key) = try await Self.loopbackLink(deployment, idToken: idToken)
            let (laterID, laterKey) = try await Self.loopbackLink(deployment, idToken: idToken)
            let links = try await Self.rows(deployment, "provider_links")
            // A scheme's held link is asked about too, and the app's false cancels it.
            let schemeKey = ResultKey()
            let schemeMade = try await Self.startURL(
                deployment, provider: "microsoft.com", idToken: idToken,
                ["return_to": Self.scheme, "mode": "link", "result_challenge": schemeKey.challenge, "login_hint": "AdeleV@contoso.example"])
            let schemeID = try await Self.continueInBrowser(deployment, startURL: schemeMade)
            let body = #"{"result":"\#(schemeID)","result_verifier":"\#(schemeKey.verifier)","confirm_link":false}"#
            let cancelled = try await Self.redeem(deployment, body)
            #expect(cancelled.status == 403, "\(cancelled.bodyText)")
            #expect(try jsonObject(cancelled)["code"] as? String == "sign-in-cancelled")
            #expect(try await Self.redeem(deployment, body).status == 404)
            #expect(try await Self.rows(deployment, "provider_links") == links)

            func redeem(_ confirm: String) async throws -> OutboundResponse {
                try await Self.redeem(
                    deployment, #"{"result":"\#(resultID)","result_verifier":"\#(key.verifier)","confirm_link":\#(confirm)}"#)
            }
            for confirm in ["1", "0", #""true""#, "{}"] {
                let refused = try await redeem(confirm)
                #expect(refused.status == 400, "\(confirm): \(refused.bodyText)")
                #expect(try jsonObject(refused)["code"] as? String == "invalid-argument")
            }
            let asked = try await redeem("null")
            #expect(asked.status == 409, "\(asked.bodyText)")
            let problem = try jsonObject(asked)
            #expect(problem["code"] as? String == "link-confirmation-required")
            #expect(problem["email"] as? String == "olive@oidc.example" && problem["emailStatus"] as? String == "verified", "\(problem)")
            #expect(problem["providerId"] as? String == "oidc.emulator" && problem["federatedId"] is String)
            #expect(try await Self.rows(deployment, "provider_links") == links)
            // The user takes their time: five minutes later the answer still counts.
            deployment.clock.advance(by: 300)
            let linked = try await redeem("true")
            #expect(linked.status == 200, "\(linked.bodyText)")
            #expect(try await Self.rows(deployment, "provider_links") == links + 1)
            // Past ten minutes a held link is gone, unanswered, and links nothing.
            deployment.clock.advance(by: 301)
            let expired = try await Self.redeem(
                deployment, #"{"result":"\#(laterID)","result_verifier":"\#(laterKey.verifier)","confirm_link":true}"#)
            #expect(expired.status == 404, "\(expired.bodyText)")
        }
    }

    @Test("a cancel sent while a confirmed link is being written waits for it and answers what was done, never a 403 beside a written link")
    func confirmAndCancelTogether() async throws {
        try await Self.withNativeDeployment(hooks: HookTests.sampleApp(timeout: 10)) { deployment in
            let tokens = try await Self.appSignIn(deployment)
            let (resultID, key) = try await Self.loopbackLink(deployment, idToken: try #require(tokens["idToken"] as? String))
            let links = try await Self.rows(deployment, "provider_links")
            @Sendable func redeem(_ confirm: Bool) async throws -> OutboundResponse {
                try await Self.redeem(
                    deployment, #"{"result":"\#(resultID)","result_verifier":"\#(key.verifier)","confirm_link":\#(confirm)}"#)
            }
            // The confirmed link's hook call is held (at most 9 s) while the app's cancel arrives.
            let confirmed = try await deployment.holdingHook("POST /sample-app/hooks/before-sign-in", milliseconds: 9000) {
                try await redeem(true)
            }
            let cancelAnswered = Mutex(false)
            let cancelled = Task {
                defer { cancelAnswered.withLock { $0 = true } }
                return try await redeem(false)
            }
            try await Task.sleep(for: .milliseconds(200))  // the cancel is in, waiting for the confirm
            // Answered already, with the confirm still held at the hook: nothing made it wait.
            let answeredEarly = cancelAnswered.withLock { $0 }
            #expect(!answeredEarly, "the cancel did not wait for the confirm")
            _ = try await deployment.control("faults/release", "{}")
            let confirmAnswer = try await confirmed.value
            let cancelAnswer = try await cancelled.value
            #expect(confirmAnswer.status == 200, "\(confirmAnswer.bodyText)")
            #expect(try await Self.rows(deployment, "provider_links") == links + 1)
            // The cancel came after the confirm: it is answered as a retry of it.
            #expect(cancelAnswer.status == 200, "\(cancelAnswer.bodyText)")
            #expect(cancelAnswer.bodyText == confirmAnswer.bodyText)
        }
    }

    /// The app's sign-in through its scheme in a browser of its own: the redeemed result's JSON
    /// (the user, the gateway's ID and refresh tokens).
    static func appSignIn(_ deployment: TestDeployment, login: String = "octocat") async throws -> [String: Any] {
        var systemBrowser = Browser(deployment)
        let page = try await consentPage(&systemBrowser, returnTo: scheme, login: login)
        let signedIn = try await systemBrowser.answerConsent(page, decision: "continue")
        return try jsonObject(try await systemBrowser.result(resultID(try #require(signedIn.headers["location"]))))
    }

    /// Opens the one-time start URL of `startURL`'s answer in a fresh browser (the system's) and
    /// answers Continue on the consent page: the result id the app is called back with.
    static func continueInBrowser(_ deployment: TestDeployment, startURL made: OutboundResponse) async throws -> String {
        var browser = Browser(deployment)
        let page = try await openToConsentPage(&browser, made)
        let done = try await browser.answerConsent(page, decision: "continue")
        return resultID(try #require(done.headers["location"]))
    }

    /// A desktop app's link of Olive's OpenID identity, started with `idToken` for a loopback
    /// return and continued in the system browser: the result id and the app's key.
    static func loopbackLink(_ deployment: TestDeployment, idToken: String) async throws -> (resultID: String, key: ResultKey) {
        let key = ResultKey()
        let made = try await startURL(
            deployment, provider: "oidc.emulator", idToken: idToken,
            [
                "return_to": "http://127.0.0.1:53124/callback", "mode": "link", "result_challenge": key.challenge,
                "login_hint": "olive@oidc.example",
            ])
        return (try await continueInBrowser(deployment, startURL: made), key)
    }

    /// The result id in the fragment of an app's return address (first in the query of a loopback one).
    static func resultID(_ location: String) -> String {
        let marker = ["?gatehouse_result=", "&gatehouse_result=", "#gatehouse_result="].lazy.compactMap { location.range(of: $0) }.first
        return marker.map { String(location[$0.upperBound...].prefix { $0 != "#" && $0 != "&" }) } ?? ""
    }

    /// `POST /v1/auth/result` with `body` (JSON text), as the app sends it.
    static func redeem(_ deployment: TestDeployment, _ body: String) async throws -> OutboundResponse {
        try await deployment.client.execute(
            OutboundRequest(
                method: "POST", url: "\(deployment.gatewayURL)/v1/auth/result", headers: ["Content-Type": "application/json"],
                body: Array(body.utf8)))
    }

    /// `POST /v1/auth/{provider}/start-url` with the app's ID token.
    static func startURL(_ deployment: TestDeployment, provider: String, idToken: String?, _ parameters: [String: String]) async throws
        -> OutboundResponse
    {
        var headers: OutboundHeaders = ["Content-Type": "application/json"]
        if let idToken { headers.add("Authorization", "Bearer \(idToken)") }
        return try await deployment.client.execute(
            OutboundRequest(
                method: "POST", url: "\(deployment.gatewayURL)/v1/auth/\(provider)/start-url", headers: headers,
                body: Array(try JSONSerialization.data(withJSONObject: parameters))))
    }

    /// A start URL linking olive's OpenID identity (`login_hint`) to the account signed in with
    /// `idToken`, returning to the app's scheme with `challenge`.
    static func oliveLinkStart(_ deployment: TestDeployment, idToken: String, challenge: String = ResultKey().challenge) async throws
        -> OutboundResponse
    {
        try await startURL(
            deployment, provider: "oidc.emulator", idToken: idToken,
            ["return_to": Self.scheme, "mode": "link", "result_challenge": challenge, "login_hint": "olive@oidc.example"])
    }

    @Test(
        "a link's consent page names the account by a verified email only, else by its uid: an address nobody verified proves nothing"
    )
    func consentNamesAccountsByVerifiedEmail() async throws {
        try await Self.withNativeDeployment { deployment in
            // Uma's only addresses are unverified, and her account's name is her login: anyone
            // could give their own account such an address or name.
            let tokens = try await Self.appSignIn(deployment, login: "unverified-uma")
            let idToken = try #require(tokens["idToken"] as? String)
            let user = try #require(tokens["user"] as? [String: Any])
            let uid = try #require(user["uid"] as? String)
            #expect(user["emailVerified"] as? Bool != true && user["displayName"] as? String == "unverified-uma", "\(user)")
            let made = try await Self.oliveLinkStart(deployment, idToken: idToken)
            var browser = Browser(deployment)
            let start = try await browser.send(try #require(try jsonObject(made)["url"] as? String))
            let page = try await browser.follow(try #require(start.headers["location"]))
            #expect(page.status == 200 && page.bodyText.contains("add this sign-in to the account <strong>\(uid)</strong>"), "\(page.bodyText)")
            #expect(!page.bodyText.contains("uma@example.org") && !page.bodyText.contains("<strong>unverified-uma</strong>"))
        }
    }

    @Test(
        "an address taken off the allow-list (a restart with new settings) gets nothing more: a sign-in started for it answers 400 invalid-return-to at its callback, before the provider is asked; its consent page's Continue and a link held for it store nothing"
    )
    func removedReturnGetsNothing() async throws {
        let folder = try TestScratch.folder("allow-list-change")
        let key = TokenVault.generateKey()
        let removedWeb = "https://old.example.com/signed-in"
        // Started while both addresses were allowed: a web sign-in at the provider's callback,
        // an app's sign-in at its consent page, and a link the app holds for its user to confirm.
        struct Begun {
            var webJar: CookieJar
            var callback: String
            var gatewayURL: String
            var appJar: CookieJar
            var page: OutboundResponse
            var held: String
            var rows: [Int]
        }
        let tables = ["accounts", "sessions", "provider_links"]
        let begun = try await withDeployment(
            gateway: {
                $0.returnToAllowList += [removedWeb, Self.scheme]
                $0.requireResultBinding = false
            }, vaultKeys: { _ in [key] }, dataFolder: folder
        ) { deployment in
            let idToken = try #require(try await Self.appSignIn(deployment)["idToken"] as? String)
            let holding = ResultKey()
            let heldID = try await Self.continueInBrowser(
                deployment, startURL: try await Self.oliveLinkStart(deployment, idToken: idToken, challenge: holding.challenge))
            var web = Browser(deployment)
            let start = try await web.start("return_to=\(FormEncoding.escape(removedWeb))&login=octocat")
            let approved = try await deployment.client.execute(OutboundRequest(url: try #require(start.headers["location"])))
            var app = Browser(deployment)
            let page = try await Self.consentPage(&app, returnTo: Self.scheme)
            #expect(Self.consentToken(page) != nil, "\(page.status): \(page.bodyText)")
            var rows: [Int] = []
            for table in tables { rows.append(try await Self.rows(deployment, table)) }
            return Begun(
                webJar: web.jar, callback: try #require(approved.headers["location"]), gatewayURL: deployment.gatewayURL, appJar: app.jar,
                page: page, held: #"{"result":"\#(heldID)","result_verifier":"\#(holding.verifier)","confirm_link":true}"#, rows: rows)
        }
        try await withDeployment(gateway: { $0.requireResultBinding = false }, vaultKeys: { _ in [key] }, dataFolder: folder) { deployment in
            var web = Browser(deployment)
            web.jar = begun.webJar
            let returned = try await web.send(deployment.gatewayURL + begun.callback.dropFirst(begun.gatewayURL.count))
            #expect(returned.status == 400 && returned.headers["location"] == nil, "\(returned.status) to \(returned.headers["location"] ?? "-")")
            #expect((try? jsonObject(returned))?["code"] as? String == "invalid-return-to")
            #expect(try await AccountSecurityTests.tokenRequests(deployment) == 0, "the provider was not asked")
            var app = Browser(deployment)
            app.jar = begun.appJar
            let answered = try await app.answerConsent(begun.page, decision: "continue")
            #expect(answered.status == 400 && answered.headers["location"] == nil, "\(answered.status) to \(answered.headers["location"] ?? "-")")
            #expect((try? jsonObject(answered))?["code"] as? String == "invalid-return-to")
            let redeemed = try await Self.redeem(deployment, begun.held)
            #expect(redeemed.status == 400 && (try? jsonObject(redeemed))?["code"] as? String == "invalid-return-to", "\(redeemed.bodyText)")
            var rows: [Int] = []
            for table in tables { rows.append(try await Self.rows(deployment, table)) }
            #expect(rows == begun.rows, "nothing was written (\(tables))")
        }
    }

    @Test(
        "a start URL dies with the session that made it: signed out (everywhere) before the browser opens it, it starts nothing"
    )
    func startURLEndsWithItsSession() async throws {
        try await Self.withNativeDeployment { deployment in
            let tokens = try await Self.appSignIn(deployment)
            let idToken = try #require(tokens["idToken"] as? String)
            let made = try await Self.oliveLinkStart(deployment, idToken: idToken)
            let url = try #require(try jsonObject(made)["url"] as? String)
            // Whoever held the app's token (a stolen one, say) is signed out everywhere.
            let signedOut = try await deployment.client.execute(
                OutboundRequest(
                    method: "POST", url: "\(deployment.gatewayURL)/v1/auth/signout?all=true", headers: ["Authorization": "Bearer \(idToken)"]))
            #expect(signedOut.status == 204)
            var browser = Browser(deployment)
            let opened = try await browser.send(url)
            try #expect(
                opened.status == 400 && (try jsonObject(opened)["code"] as? String) == "invalid-state", "\(opened.status): \(opened.bodyText)")
            #expect(try await Self.rows(deployment, "provider_links") == 1)
        }
    }

    @Test(
        "a flow under way dies with the session that made its start URL: after a sign-out everywhere, its callback, its consent page (link or re-authentication) and its held link each answer 400 invalid-state; nothing is linked, no session begins, the held link is not put to the user"
    )
    func flowsEndWithTheirSession() async throws {
        try await Self.withNativeDeployment { deployment in
            let idToken = try #require(try await Self.appSignIn(deployment)["idToken"] as? String)
            let links = try await Self.rows(deployment, "provider_links")
            // Four flows made before the sign-out, each stopped at another step.
            let atProviderKey = ResultKey()
            var atProvider = Browser(deployment)
            let atProviderStart = try await atProvider.send(
                try #require(
                    try jsonObject(try await Self.oliveLinkStart(deployment, idToken: idToken, challenge: atProviderKey.challenge))["url"]
                        as? String))
            let authorize = try #require(atProviderStart.headers["location"])
            let atPageKey = ResultKey()
            var atPage = Browser(deployment)
            let linkPage = try await Self.openToConsentPage(
                &atPage, try await Self.oliveLinkStart(deployment, idToken: idToken, challenge: atPageKey.challenge))
            let heldKey = ResultKey()
            let heldID = try await Self.continueInBrowser(
                deployment, startURL: try await Self.oliveLinkStart(deployment, idToken: idToken, challenge: heldKey.challenge))
            let reauthKey = ResultKey()
            var reauthBrowser = Browser(deployment)
            let reauthPage = try await Self.openToConsentPage(
                &reauthBrowser,
                try await Self.startURL(
                    deployment, provider: "github.com", idToken: idToken,
                    ["return_to": Self.scheme, "mode": "reauthenticate", "result_challenge": reauthKey.challenge, "login": "octocat"]))

            let everywhere = try await deployment.client.execute(
                OutboundRequest(
                    method: "POST", url: "\(deployment.gatewayURL)/v1/auth/signout?all=true", headers: ["Authorization": "Bearer \(idToken)"]))
            #expect(everywhere.status == 204)

            // At the provider: the callback sends the app its failure, without a consent page.
            let returned = try await atProvider.follow(authorize)
            #expect(returned.status == 303 && Self.consentToken(returned) == nil, "\(returned.status): \(returned.bodyText)")
            let callbackID = Self.resultID(try #require(returned.headers["location"]))
            let answered = [
                (callbackID, atProviderKey),
                (Self.resultID(try #require(try await atPage.answerConsent(linkPage, decision: "continue").headers["location"])), atPageKey),
                (heldID, heldKey),
                (Self.resultID(try #require(try await reauthBrowser.answerConsent(reauthPage, decision: "continue").headers["location"])), reauthKey),
            ]
            for (resultID, key) in answered {
                // No confirm_link: a held link whose session ended is refused, not named to the user.
                let redeemed = try await Self.redeem(deployment, #"{"result":"\#(resultID)","result_verifier":"\#(key.verifier)"}"#)
                try #expect(
                    redeemed.status == 400 && (try jsonObject(redeemed)["code"] as? String) == "invalid-state",
                    "\(redeemed.status): \(redeemed.bodyText)")
                #expect(try await Self.redeem(deployment, #"{"result":"\#(resultID)","result_verifier":"\#(key.verifier)"}"#).status == 404)
            }
            #expect(try await Self.rows(deployment, "provider_links") == links)
            #expect(try await Self.rows(deployment, "sessions") == 0)
        }
    }

    /// Opens the start URL of `made` in `browser` and follows the provider's approval to the
    /// consent page.
    static func openToConsentPage(_ browser: inout Browser, _ made: OutboundResponse) async throws -> OutboundResponse {
        let start = try await browser.send(try #require(try jsonObject(made)["url"] as? String))
        return try await browser.follow(try #require(start.headers["location"]))
    }

    @Test(
        "an app links a provider and re-authenticates: a one-time start URL made with its bearer token, finished in the system browser (a cookie jar of its own) through the consent page, the result bound to the app's verifier, a link written once the app's user confirmed the identity"
    )
    func appLinksAndReauthenticates() async throws {
        try await Self.withNativeDeployment { deployment in
            // The app signs in through its scheme and holds the gateway's tokens.
            let tokens = try await Self.appSignIn(deployment)
            let idToken = try #require(tokens["idToken"] as? String)
            let uid = try #require((tokens["user"] as? [String: Any])?["uid"] as? String)

            // Before: a start made by the app's own HTTP client leaves the transaction cookie
            // there; only the start URL carries the account into the browser.
            let key = ResultKey()
            let made = try await Self.oliveLinkStart(deployment, idToken: idToken, challenge: key.challenge)
            #expect(made.status == 200, "\(made.bodyText)")
            #expect(made.headers["cache-control"] == "no-store")
            let url = try #require(try jsonObject(made)["url"] as? String)
            #expect(url.hasPrefix("\(deployment.gatewayURL)/v1/auth/oidc.emulator/start?start_token=") && !url.contains(idToken))

            var linkBrowser = Browser(deployment)  // the system browser: no session of the app's
            let start = try await linkBrowser.send(url)
            #expect(start.status == 302, "\(start.bodyText)")
            let page = try await linkBrowser.follow(try #require(start.headers["location"]))
            // The page names the gateway account the identity would join: someone handed the
            // start URL sees that it is not theirs.
            let ownerEmail = try #require((tokens["user"] as? [String: Any])?["email"] as? String)
            #expect(
                page.status == 200 && page.bodyText.contains("add this sign-in to the account <strong>\(ownerEmail)</strong>"), "\(page.bodyText)")
            #expect(page.bodyText.contains("Continue only if <strong>\(ownerEmail)</strong> is your own account"))
            #expect(try await Self.rows(deployment, "provider_links") == 1)
            let done = try await linkBrowser.answerConsent(page, decision: "continue")
            let location = try #require(done.headers["location"])
            let resultID = Self.resultID(location)
            // Whoever opened the start URL answered the page; the link waits for the app, which
            // alone holds the verifier.
            #expect(try await Self.rows(deployment, "provider_links") == 1, "nothing linked before the app redeems")
            // Bound to the app's verifier: the id alone redeems nothing, and links nothing.
            let unbound = try await Self.redeem(deployment, #"{"result":"\#(resultID)","result_verifier":"\#(ResultKey().verifier)"}"#)
            #expect(unbound.status == 404)
            #expect(try await Self.rows(deployment, "provider_links") == 1)
            // Any page can hand a scheme's callback to the waiting app (the one of whoever opened
            // the start URL first), so the app's user is shown the identity before it is written.
            let asked = try await Self.redeem(deployment, #"{"result":"\#(resultID)","result_verifier":"\#(key.verifier)"}"#)
            #expect(asked.status == 409, "\(asked.bodyText)")
            let named = try jsonObject(asked)
            #expect(named["code"] as? String == "link-confirmation-required" && named["email"] as? String == "olive@oidc.example")
            #expect(try await Self.rows(deployment, "provider_links") == 1)
            let linked = try await Self.redeem(
                deployment, #"{"result":"\#(resultID)","result_verifier":"\#(key.verifier)","confirm_link":true}"#)
            #expect(linked.status == 200, "\(linked.bodyText)")
            let answer = try jsonObject(linked)
            #expect(answer["operationType"] as? String == "link" && answer["idToken"] == nil)
            #expect(try account(linked).uid == uid && Set(try account(linked).providers) == ["github.com", "oidc.emulator"])
            #expect(try await Self.rows(deployment, "provider_links") == 2)

            // The start URL works once.
            var replay = Browser(deployment)
            let reused = try await replay.send(url)
            try #expect(reused.status == 400 && (try jsonObject(reused)["code"] as? String) == "invalid-state", "\(reused.bodyText)")

            // Re-authentication: a new session for the same account.
            let reauthKey = ResultKey()
            let reauth = try await Self.startURL(
                deployment, provider: "github.com", idToken: idToken,
                ["return_to": Self.scheme, "mode": "reauthenticate", "result_challenge": reauthKey.challenge, "login": "octocat"])
            let reauthID = try await Self.continueInBrowser(deployment, startURL: reauth)
            // Until the app holds the new session's tokens, its session goes on (a result that
            // never reaches it signs it out of nothing).
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 200)
            let reauthenticated = try await Self.redeem(deployment, #"{"result":"\#(reauthID)","result_verifier":"\#(reauthKey.verifier)"}"#)
            let fresh = try jsonObject(reauthenticated)
            let holds = fresh["operationType"] as? String == "reauthenticate" && (fresh["idToken"] as? String).map { $0 != idToken } == true
            #expect(holds)
            // The new session replaces the one that asked for it: the app's old tokens end
            // with it (kept, they would outlive the app's sign-out).
            let freshToken = try #require(fresh["idToken"] as? String)
            let oldRefresh = try #require(tokens["refreshToken"] as? String)
            let refreshedOld = try await GatewayTokenTests.refresh(deployment, oldRefresh)
            #expect(refreshedOld.status == 400, "\(refreshedOld.bodyText)")
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 401)
            #expect(try await GatewayTokenTests.bearer(deployment, freshToken).status == 200)

            // Refused: no bearer token; a web return; no result_challenge.
            #expect(
                try await Self.startURL(deployment, provider: "github.com", idToken: nil, ["return_to": Self.scheme, "mode": "link"]).status == 401)
            let web = try await Self.startURL(
                deployment, provider: "oidc.emulator", idToken: freshToken,
                ["return_to": TestDeployment.returnTo, "mode": "link", "result_challenge": ResultKey().challenge])
            try #expect(web.status == 400 && (try jsonObject(web)["code"] as? String) == "invalid-return-to")
            let unboundStart = try await Self.startURL(
                deployment, provider: "oidc.emulator", idToken: freshToken, ["return_to": Self.scheme, "mode": "link"])
            #expect(unboundStart.status == 400, "\(unboundStart.bodyText)")
        }
    }
}
