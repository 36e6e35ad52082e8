import CurlClient
import Foundation
import GatehouseCore
import Testing

/// Issue #15: a stolen session, result id or ID token must not become an account takeover,
/// and no cookie-authenticated action may be triggered cross-site. One test per attack.
@Suite("Account and session security")
struct AccountSecurityTests {
    static let olive = "olive@oidc.example"

    /// A GET with the browser's cookies and extra headers (a navigation, not a fetch).
    static func navigate(_ browser: inout Browser, _ path: String, headers: OutboundHeaders) async throws -> OutboundResponse {
        try await browser.send("\(browser.deployment.gatewayURL)\(path)", headers: headers)
    }

    @Test(
        "a link or re-authentication under way dies with the session that started it: signed out everywhere before the callback, it links nothing and begins no session"
    )
    func flowEndsWithItsSession() async throws {
        try await withDeployment { deployment in
            // Whoever holds the session (a stolen cookie, say) starts a link of their identity
            // and a re-authentication, and leaves them at the provider.
            var holder = Browser(deployment)
            #expect(try await holder.complete(login: "octocat").status == 200)
            let link = try await holder.authorize(login: Self.olive, provider: "oidc.emulator", mode: "link")
            let linkKey = holder.resultKey
            let reauth = try await holder.authorize(login: "octocat", mode: "reauthenticate")
            let reauthKey = holder.resultKey
            // The owner, on another device, signs out everywhere.
            var owner = Browser(deployment)
            #expect(try await owner.complete(login: "octocat").status == 200)
            let signedOut = try await owner.send("\(deployment.gatewayURL)/v1/auth/signout?all=true", method: "POST")
            #expect(signedOut.status == 204, "\(signedOut.bodyText)")
            let links = try await NativeAppTests.rows(deployment, "provider_links")
            let tokenCalls = try await Self.tokenRequests(deployment)

            for (callback, key) in [(link, linkKey), (reauth, reauthKey)] {
                holder.resultKey = key
                let returned = try await holder.send(callback)
                let location = try #require(returned.headers["location"], "\(returned.status): \(returned.bodyText)")
                let result = try await holder.result(NativeAppTests.resultID(location))
                #expect(result.status == 400, "\(result.bodyText)")
                #expect(try jsonObject(result)["code"] as? String == "invalid-state")
                #expect(returned.headers["set-cookie"]?.contains("gatehouse-session=") != true)
            }
            #expect(try await NativeAppTests.rows(deployment, "provider_links") == links)
            #expect(try await NativeAppTests.rows(deployment, "sessions") == 0)
            #expect(try await Self.tokenRequests(deployment) == tokenCalls, "the providers' codes were not spent")
        }
    }

    /// The requests the emulator's token endpoints (every provider's) have answered.
    static func tokenRequests(_ deployment: TestDeployment) async throws -> Int {
        try await deployment.emulatorStats().filter { $0.key.hasPrefix("POST ") && $0.key.contains("token") }.values.reduce(0, +)
    }

    @Test("a stale session cannot add a sign-in method: link by redirect, by ID token and by pending token need a recent login")
    func linkingNeedsRecentLogin() async throws {
        try await withDeployment(gateway: { $0.recentLoginWindow = 60 }) { deployment in
            var victim = Browser(deployment)
            let uid = try account(try await victim.complete(login: "octocat")).uid
            deployment.clock.advance(by: 61)
            // What an attacker holding the session tries: attach their own identity, then
            // re-authenticate with it and remove the owner's methods.
            let delete = try await victim.send("\(deployment.gatewayURL)/v1/me", method: "DELETE")
            #expect(delete.status == 401)
            let link = try await victim.start(
                "return_to=\(FormEncoding.escape(TestDeployment.returnTo))&login_hint=\(Self.olive)&mode=link", provider: "oidc.emulator")
            #expect(link.status == 401)
            #expect(try jsonObject(link)["code"] as? String == "requires-recent-login")
            let rawNonce = "attacker-nonce"
            let idToken = try await OIDCSignInTests.mint(
                deployment, issuer: "oidc", hint: Self.olive, extra: #", "nonce": "\#(SecureRandom.digest(rawNonce))""#)
            let byToken = try await victim.json(
                "/v1/auth/idtoken", #"{"providerId": "oidc.emulator", "idToken": "\#(idToken)", "rawNonce": "\#(rawNonce)", "mode": "link"}"#)
            #expect(byToken.status == 401)
            #expect(try jsonObject(byToken)["code"] as? String == "requires-recent-login")
            // Nothing was linked: re-authenticating with the attacker's identity is refused.
            let reauth = try await victim.start(
                "return_to=\(FormEncoding.escape(TestDeployment.returnTo))&login_hint=\(Self.olive)&mode=reauthenticate", provider: "oidc.emulator")
            #expect(reauth.status == 404)
            #expect(try jsonObject(reauth)["code"] as? String == "provider-not-linked")
            let me = try await victim.send("\(deployment.gatewayURL)/v1/me")
            #expect(try account(me) == (uid, ["github.com"]))

            // After a fresh sign-in the owner links as before.
            #expect(try await victim.complete(login: "octocat", mode: "reauthenticate").status == 200)
            #expect(
                try account(try await victim.complete(login: Self.olive, provider: "oidc.emulator", mode: "link")) == (
                    uid, ["github.com", "oidc.emulator"]
                ))
        }
        // The window holds when the provider answers, not only when the flow starts: a flow
        // lives ten minutes, which would give a session near the window's end ten more.
        try await withDeployment(gateway: { $0.recentLoginWindow = 60 }) { deployment in
            var holder = Browser(deployment)
            let uid = try account(try await holder.complete(login: "octocat")).uid
            deployment.clock.advance(by: 50)
            let callback = try await holder.authorize(login: Self.olive, provider: "oidc.emulator", mode: "link")
            deployment.clock.advance(by: 11)
            let returned = try await holder.send(callback)
            let location = try #require(returned.headers["location"], "\(returned.status): \(returned.bodyText)")
            let foundId = location.range(of: "#gatehouse_result=").map { String(location[$0.upperBound...]) }
            let late = try await holder.result(try #require(foundId))
            #expect(try jsonObject(late)["code"] as? String == "requires-recent-login", "\(late.bodyText)")
            let me = try await holder.send("\(deployment.gatewayURL)/v1/me")
            #expect(try account(me) == (uid, ["github.com"]))
        }
    }

    @Test("a stolen result id redeems nothing without its verifier, and stays redeemable by the browser that started the flow")
    func resultIsBoundToItsClient() async throws {
        try await withDeployment { deployment in
            var owner = Browser(deployment)
            let resultID = try await owner.signIn(login: "octocat")
            var thief = Browser(deployment)
            thief.origin = nil
            let bare = try await thief.send(
                "\(deployment.gatewayURL)/v1/auth/result", method: "POST", headers: ["Content-Type": "application/json"],
                body: Array(#"{"result":"\#(resultID)"}"#.utf8))
            #expect(bare.status == 400)
            #expect(try jsonObject(bare)["code"] as? String == "invalid-result")
            #expect(bare.bodyText.contains("refreshToken") == false)
            thief.resultKey = ResultKey()
            let guessed = try await thief.result(resultID)
            #expect(guessed.status == 404)
            #expect(try jsonObject(guessed)["code"] as? String == "result-not-found")

            let redeemed = try await owner.result(resultID)
            #expect(redeemed.status == 200)
            #expect(try jsonObject(redeemed)["refreshToken"] as? String != nil)

            // Binding is required by default: a start without result_challenge is refused.
            let unbound = try await owner.start("return_to=\(FormEncoding.escape(TestDeployment.returnTo))&login=octocat&result_challenge=short")
            #expect(unbound.status == 400)
            let missing = try await owner.send(
                "\(deployment.gatewayURL)/v1/auth/github.com/start?return_to=\(FormEncoding.escape(TestDeployment.returnTo))&login=octocat")
            #expect(missing.status == 400)
            #expect((try jsonObject(missing)["detail"] as? String)?.contains("result_challenge") == true)
        }
        // GATEHOUSE_REQUIRE_RESULT_BINDING=false keeps the unbound flow for existing clients.
        try await withDeployment(gateway: { $0.requireResultBinding = false }) { deployment in
            var legacy = Browser(deployment)
            let start = try await legacy.send(
                "\(deployment.gatewayURL)/v1/auth/github.com/start?return_to=\(FormEncoding.escape(TestDeployment.returnTo))&login=octocat")
            #expect(start.status == 302)
            let approved = try await deployment.client.execute(OutboundRequest(url: try #require(start.headers["location"])))
            let callback = try await legacy.send(try #require(approved.headers["location"]))
            let location = try #require(callback.headers["location"])
            let foundId = location.range(of: "#gatehouse_result=").map { String(location[$0.upperBound...]) }
            let id = try #require(foundId)
            let redeemed = try await legacy.send(
                "\(deployment.gatewayURL)/v1/auth/result", method: "POST", headers: ["Content-Type": "application/json"],
                body: Array(#"{"result":"\#(id)"}"#.utf8))
            #expect(redeemed.status == 200)
        }
    }

    @Test(
        "link and re-authentication starts refuse a cross-site navigation, a foreign Origin or Referer, or neither; the same start from the page works"
    )
    func crossSiteStartsAreRefused() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            _ = try await browser.complete(login: "octocat")
            let returnTo = FormEncoding.escape(TestDeployment.returnTo)
            for mode in ["link", "reauthenticate"] {
                let provider = mode == "link" ? "oidc.emulator" : "github.com"
                let key = ResultKey()
                let path = "/v1/auth/\(provider)/start?return_to=\(returnTo)&mode=\(mode)&result_challenge=\(key.challenge)"
                let crossSite = try await Self.navigate(&browser, path, headers: ["Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"])
                #expect(crossSite.status == 403, "\(mode)")
                #expect(try jsonObject(crossSite)["code"] as? String == "origin-not-allowed")
                #expect(crossSite.headers["set-cookie"] == nil)
                let foreign = try await Self.navigate(&browser, path, headers: ["Origin": "https://evil.example", "Accept": "application/json"])
                #expect(foreign.status == 403, "\(mode)")
                // Browsers without Fetch Metadata send neither header on a navigation: the
                // `Referer` must then name an allowed page; a link opened from outside the
                // browser (`none`) or from a sibling host (`same-site`) must name one too.
                let unmarked: [OutboundHeaders] = [
                    [:], ["Referer": "https://evil.example/page"], ["Sec-Fetch-Site": "none"],
                    ["Sec-Fetch-Site": "same-site", "Referer": "https://files.example.com/"],
                    ["Referer": "https://app.example.com.evil.example/"], ["Referer": "not a url"],
                ]
                for headers in unmarked {
                    let refused = try await Self.navigate(&browser, path, headers: headers)
                    #expect(refused.status == 403, "\(mode) \(headers)")
                    #expect(try jsonObject(refused)["code"] as? String == "origin-not-allowed")
                    #expect(refused.headers["set-cookie"] == nil)
                }
                let marked: [OutboundHeaders] = [
                    ["Referer": "https://app.example.com/settings?tab=1"], ["Sec-Fetch-Site": "same-origin"],
                    ["Sec-Fetch-Site": "same-site", "Referer": "https://app.example.com/"],
                ]
                for headers in marked {
                    let allowed = try await Self.navigate(&browser, path, headers: headers)
                    #expect(allowed.status == 302, "\(mode) \(headers): \(allowed.bodyText)")
                }
                let page = try await Self.navigate(
                    &browser, path, headers: ["Origin": "https://app.example.com", "Sec-Fetch-Site": "same-site", "Accept": "application/json"])
                #expect(page.status == 200, "\(mode): \(page.bodyText)")
                #expect(try jsonObject(page)["authorizationUrl"] as? String != nil)
            }
        }
    }

    @Test(
        "a web sign-in bound to a result challenge starts only from an allowed page: another site's page cannot bind the user's result to its own verifier; a program's start, an app's return and an unbound start are not refused"
    )
    func boundSignInStartsFromAnAllowedPage() async throws {
        try await withDeployment(gateway: { $0.returnToAllowList.append(NativeAppTests.scheme) }) { deployment in
            var browser = Browser(deployment)
            let returnTo = FormEncoding.escape(TestDeployment.returnTo)
            let path = "/v1/auth/github.com/start?return_to=\(returnTo)&login=octocat&result_challenge=\(ResultKey().challenge)"
            // Another site's page navigating the user's browser there (with its own challenge: a
            // provider that approves silently would complete the sign-in, and a leaked result
            // id would give that site the user's tokens); an email's link; a sibling host.
            let elsewhere: [OutboundHeaders] = [
                ["Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"], ["Sec-Fetch-Site": "cross-site", "Referer": "https://evil.example/"],
                ["Sec-Fetch-Site": "none"], ["Sec-Fetch-Site": "same-site", "Referer": "https://files.example.com/"],
                ["Referer": "https://evil.example/page"], ["Referer": "https://app.example.com.evil.example/"], ["Referer": "not a url"],
                ["Origin": "https://evil.example", "Accept": "application/json"],
            ]
            for headers in elsewhere {
                let refused = try await Self.navigate(&browser, path, headers: headers)
                #expect(refused.status == 403, "\(headers): \(refused.bodyText)")
                #expect(try jsonObject(refused)["code"] as? String == "origin-not-allowed", "\(headers)")
                #expect(refused.headers["set-cookie"] == nil, "\(headers)")
            }
            // The app's own page, and a program that shows no page at all (curl, a test client).
            let fromThePage: [OutboundHeaders] = [
                [:], ["Sec-Fetch-Site": "same-origin"], ["Sec-Fetch-Site": "cross-site", "Referer": "https://app.example.com/"],
                ["Sec-Fetch-Site": "same-site", "Referer": "https://app.example.com/login?next=1"],
                ["Origin": "https://app.example.com", "Sec-Fetch-Site": "same-site"],
            ]
            for headers in fromThePage {
                let started = try await Self.navigate(&browser, path, headers: headers)
                #expect(started.status == 302, "\(headers): \(started.bodyText)")
            }
            // An app's return stops at the consent page, which names the app: the system's
            // browser opens its start from nowhere.
            let app = "/v1/auth/github.com/start?return_to=\(FormEncoding.escape(NativeAppTests.scheme))&login=octocat"
            let native = try await Self.navigate(
                &browser, app + "&result_challenge=\(ResultKey().challenge)", headers: ["Sec-Fetch-Site": "cross-site"])
            #expect(native.status == 302, "\(native.bodyText)")
        }
        // Without binding, a result goes to whoever holds its id, whoever started it.
        try await withDeployment(gateway: { $0.requireResultBinding = false }) { deployment in
            var browser = Browser(deployment)
            let unbound = try await Self.navigate(
                &browser, "/v1/auth/github.com/start?return_to=\(FormEncoding.escape(TestDeployment.returnTo))&login=octocat",
                headers: ["Sec-Fetch-Site": "cross-site"])
            #expect(unbound.status == 302, "\(unbound.bodyText)")
        }
    }

    @Test(
        "a re-authentication asks the provider for the user's credentials again (prompt=login, and max_age=0 where ID tokens then carry auth_time); an app's prompt must include login, its max_age be 0; GitHub has no such prompt, and a sign-in asks none"
    )
    func reauthenticationPromptsForLogin() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            _ = try await browser.complete(login: Self.olive, provider: "oidc.emulator")
            _ = try await browser.complete(login: "octocat", provider: "github.com", mode: "link")
            let returnTo = FormEncoding.escape(TestDeployment.returnTo)
            func asked(_ query: String, provider: String) async throws -> [String] {
                let start = try await browser.start("return_to=\(returnTo)&\(query)", provider: provider)
                let location = try #require(start.headers["location"], "\(start.status): \(start.bodyText)")
                return try #require(URLComponents(string: location)).queryItems?.filter { ["prompt", "max_age"].contains($0.name) }
                    .map { "\($0.name)=\($0.value ?? "")" } ?? []
            }
            let reauthenticate = "mode=reauthenticate&login_hint=\(Self.olive)"
            #expect(try await asked(reauthenticate, provider: "oidc.emulator") == ["prompt=login", "max_age=0"])
            #expect(
                try await asked("\(reauthenticate)&prompt=login%20consent&max_age=0", provider: "oidc.emulator") == [
                    "prompt=login consent", "max_age=0",
                ])
            // Named in another case (a provider may read names without it): checked, and the
            // exact name added.
            #expect(try await asked("\(reauthenticate)&Prompt=login&MAX_AGE=0", provider: "oidc.emulator") == ["prompt=login", "max_age=0"])
            for weaker in [
                "prompt=consent", "prompt=none", "max_age=3600", "prompt=login&max_age=86400", "prompt=login&prompt=none", "max_age=0&max_age=60",
                "Prompt=none", "MAX_AGE=3600",
            ] {
                let refused = try await browser.start("return_to=\(returnTo)&\(reauthenticate)&\(weaker)", provider: "oidc.emulator")
                #expect(refused.status == 400, "\(weaker)")
                #expect(try jsonObject(refused)["code"] as? String == "invalid-custom-parameter", "\(weaker)")
            }
            #expect(try await asked("login_hint=\(Self.olive)&prompt=consent", provider: "oidc.emulator") == ["prompt=consent"])
            #expect(try await asked("mode=reauthenticate&login=octocat", provider: "github.com") == [])
            // The provider asked again, the re-authentication completes.
            #expect(try await browser.complete(login: Self.olive, provider: "oidc.emulator", mode: "reauthenticate").status == 200)
        }
    }

    @Test(
        "a sign-in the provider's own session answered (an hour-old auth_time) is no recent login, its ID token says so, and a re-authentication answered so is refused and starts no session; Microsoft's tokens without auth_time are taken at their word"
    )
    func recentLoginCountsFromTheProvidersAuthentication() async throws {
        try await withDeployment { deployment in
            let stale = #"{"issuer": "oidc", "mode": "stale-auth-time"}"#
            var browser = Browser(deployment)
            #expect(try await deployment.control("oidc/tamper", stale).status == 201)
            let signedIn = try await browser.complete(login: Self.olive, provider: "oidc.emulator")
            #expect(signedIn.status == 200)
            let idToken = try #require(try jsonObject(signedIn)["idToken"] as? String)
            let payload = try #require(Base64URL.decode(String(idToken.split(separator: ".")[1])))
            let authTime = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])["auth_time"] as? Int
            let age = deployment.clock.now().timeIntervalSince1970 - Double(try #require(authTime))
            #expect(age > 3500 && age < 3700, "the provider's authentication, an hour ago: \(age)")
            let refused = try await browser.send("\(deployment.gatewayURL)/v1/me", method: "DELETE")
            #expect(refused.status == 401)
            #expect(try jsonObject(refused)["code"] as? String == "requires-recent-login")

            // A re-authentication starts a new session: its cookie changes only when one succeeds.
            let session = { (browser: Browser) in browser.jar.cookies.filter { $0.key.hasSuffix("gatehouse-session") } }
            let before = session(browser)
            #expect(before.count == 1)
            // The provider's session answered; or the token does not say, though max_age=0 asked it to.
            for mode in ["stale-auth-time", "missing-auth-time"] {
                #expect(try await deployment.control("oidc/tamper", #"{"issuer": "oidc", "mode": "\#(mode)"}"#).status == 201)
                let answeredBySession = try await browser.complete(login: Self.olive, provider: "oidc.emulator", mode: "reauthenticate")
                #expect(answeredBySession.status == 401, "\(mode)")
                #expect(try jsonObject(answeredBySession)["code"] as? String == "requires-recent-login", "\(mode)")
            }
            #expect(session(browser) == before, "no new session")
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me").status == 200)

            #expect(try await browser.complete(login: Self.olive, provider: "oidc.emulator", mode: "reauthenticate").status == 200)
            #expect(session(browser) != before && session(browser).count == 1)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me", method: "DELETE").status == 204)

            var adele = Browser(deployment)
            _ = try await adele.complete(login: "AdeleV@contoso.example", provider: "microsoft.com")
            #expect(try await adele.complete(login: "AdeleV@contoso.example", provider: "microsoft.com", mode: "reauthenticate").status == 200)
            #expect(try await deployment.control("oidc/tamper", #"{"issuer": "microsoft", "mode": "stale-auth-time"}"#).status == 201)
            let staleMicrosoft = try await adele.complete(login: "AdeleV@contoso.example", provider: "microsoft.com", mode: "reauthenticate")
            #expect(staleMicrosoft.status == 401)
            #expect(try jsonObject(staleMicrosoft)["code"] as? String == "requires-recent-login")
        }
    }

    @Test("sign-out without an allowed Origin is refused and keeps the session, signed in or not")
    func crossSiteSignOutIsRefused() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            _ = try await browser.complete(login: "octocat")
            let signOut = "\(deployment.gatewayURL)/v1/auth/signout"
            browser.origin = nil
            let formPost = try await browser.send(signOut, method: "POST", headers: ["Sec-Fetch-Site": "cross-site"])
            #expect(formPost.status == 403)
            #expect(try jsonObject(formPost)["code"] as? String == "origin-not-allowed")
            #expect(formPost.headers["set-cookie"] == nil)
            let foreign = try await browser.send(signOut, method: "POST", headers: ["Origin": "https://evil.example"])
            #expect(foreign.status == 403)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me").status == 200, "the session survived")
            var stranger = Browser(deployment)
            stranger.origin = nil
            #expect(try await stranger.send(signOut, method: "POST").status == 403)
            browser.origin = "https://app.example.com"
            #expect(try await browser.send(signOut, method: "POST").status == 204)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me").status == 401)
        }
    }

    @Test(
        "ID tokens: a nonce in the token needs its rawNonce; link and re-authentication need one; a token signs in once; stale ones cannot re-authenticate"
    )
    func idTokenNoncesFreshnessAndReplay() async throws {
        try await withDeployment(gateway: { $0.recentLoginWindow = 60 }) { deployment in
            var browser = Browser(deployment)
            let rawNonce = "raw-nonce-of-this-app"
            let withNonce = try await OIDCSignInTests.mint(
                deployment, issuer: "oidc", hint: Self.olive, extra: #", "nonce": "\#(SecureRandom.digest(rawNonce))""#)
            // Captured from another client and replayed with the nonce left out.
            let leftOut = try await browser.json("/v1/auth/idtoken", #"{"providerId": "oidc.emulator", "idToken": "\#(withNonce)"}"#)
            #expect(leftOut.status == 400)
            #expect(try jsonObject(leftOut)["code"] as? String == "missing-or-invalid-nonce")
            let yahoo = try await OIDCSignInTests.mint(deployment, issuer: "yahoo", hint: "yuki@yahoo.example", extra: #", "nonce": "n-1""#)
            let yahooLeftOut = try await browser.json("/v1/auth/idtoken", #"{"providerId": "yahoo.com", "idToken": "\#(yahoo)"}"#)
            #expect(try jsonObject(yahooLeftOut)["code"] as? String == "missing-or-invalid-nonce")

            let first = try await browser.json(
                "/v1/auth/idtoken", #"{"providerId": "oidc.emulator", "idToken": "\#(withNonce)", "rawNonce": "\#(rawNonce)"}"#)
            #expect(first.status == 200, "\(first.bodyText)")
            let replay = try await browser.json(
                "/v1/auth/idtoken", #"{"providerId": "oidc.emulator", "idToken": "\#(withNonce)", "rawNonce": "\#(rawNonce)"}"#)
            #expect(replay.status == 400)
            #expect(try jsonObject(replay)["code"] as? String == "invalid-idp-response")

            // Re-authentication by ID token: a nonce is required, and the token is used once.
            let noNonce = try await OIDCSignInTests.mint(deployment, issuer: "oidc", hint: Self.olive)
            let reauthWithout = try await browser.json(
                "/v1/auth/idtoken", #"{"providerId": "oidc.emulator", "idToken": "\#(noNonce)", "mode": "reauthenticate"}"#)
            #expect(reauthWithout.status == 400)
            #expect(try jsonObject(reauthWithout)["code"] as? String == "missing-or-invalid-nonce")
            let fresh = try await OIDCSignInTests.mint(
                deployment, issuer: "oidc", hint: Self.olive, extra: #", "nonce": "\#(SecureRandom.digest("reauth-nonce"))""#)
            let body = #"{"providerId": "oidc.emulator", "idToken": "\#(fresh)", "rawNonce": "reauth-nonce", "mode": "reauthenticate"}"#
            #expect(try await browser.json("/v1/auth/idtoken", body).status == 200)
            #expect(try await browser.json("/v1/auth/idtoken", body).status == 400, "the same token twice")

            // An app's re-authentication with its bearer token: the new session replaces the one
            // that asked, whose tokens end with it.
            @Sendable func app(_ nonce: String, mode: String, bearer: String?) async throws -> OutboundResponse {
                let token = try await OIDCSignInTests.mint(
                    deployment, issuer: "oidc", hint: Self.olive, extra: #", "nonce": "\#(SecureRandom.digest(nonce))""#)
                var headers: OutboundHeaders = ["Content-Type": "application/json"]
                if let bearer { headers.add("Authorization", "Bearer \(bearer)") }
                return try await deployment.client.execute(
                    OutboundRequest(
                        method: "POST", url: "\(deployment.gatewayURL)/v1/auth/idtoken", headers: headers,
                        body: Array(#"{"providerId": "oidc.emulator", "idToken": "\#(token)", "rawNonce": "\#(nonce)", "mode": "\#(mode)"}"#.utf8)))
            }
            let signedIn = try jsonObject(try await app("app-nonce", mode: "signin", bearer: nil))
            let (oldToken, oldRefresh) = (try #require(signedIn["idToken"] as? String), try #require(signedIn["refreshToken"] as? String))
            let byBearer = try await app("bearer-nonce", mode: "reauthenticate", bearer: oldToken)
            #expect(byBearer.status == 200, "\(byBearer.bodyText)")
            let newToken = try #require(try jsonObject(byBearer)["idToken"] as? String)
            #expect(try await GatewayTokenTests.bearer(deployment, newToken).status == 200)
            #expect(try await GatewayTokenTests.bearer(deployment, oldToken).status == 401)
            #expect(try await GatewayTokenTests.refresh(deployment, oldRefresh).status == 400)

            // A token from a sign-in older than the recent-login window cannot re-authenticate.
            let old = try await OIDCSignInTests.mint(
                deployment, issuer: "oidc", hint: Self.olive, extra: #", "nonce": "\#(SecureRandom.digest("old-nonce"))""#)
            deployment.clock.advance(by: 61)
            let stale = try await browser.json(
                "/v1/auth/idtoken", #"{"providerId": "oidc.emulator", "idToken": "\#(old)", "rawNonce": "old-nonce", "mode": "reauthenticate"}"#)
            #expect(stale.status == 400)
            #expect(try jsonObject(stale)["code"] as? String == "invalid-idp-response")
        }
    }

    @Test("/v1/me… is rate limited per signed-in user and /v1/users… per service key, with Retry-After")
    func perCallerRateLimits() async throws {
        // The budgets refill with the gateway's clock: stopped, four calls are four within the
        // minute however slowly a loaded machine runs them.
        let clock = StoppedClock()
        try await withDeployment(gateway: {
            $0.userRateLimitPerMinute = 3
            $0.serviceRateLimitPerMinute = 3
            $0.clock = clock
        }) { deployment in
            var octo = Browser(deployment)
            let uid = try account(try await octo.complete(login: "octocat")).uid
            var statuses: [Int] = []
            var retryAfter: String?
            for _ in 0..<4 {
                let answer = try await octo.send("\(deployment.gatewayURL)/v1/me")
                statuses.append(answer.status)
                retryAfter = answer.headers["retry-after"] ?? retryAfter
                if answer.status == 429 { #expect(try jsonObject(answer)["code"] as? String == "rate-limited") }
            }
            #expect(statuses == [200, 200, 200, 429])
            #expect((Int(retryAfter ?? "") ?? 0) >= 1)
            // Another user has a budget of their own.
            var pat = Browser(deployment)
            _ = try await pat.complete(login: "private-pat")
            #expect(try await pat.send("\(deployment.gatewayURL)/v1/me").status == 200)
            // The budget refills with time.
            clock.advance(by: 30)
            #expect(try await octo.send("\(deployment.gatewayURL)/v1/me").status == 200)

            let keys = ServiceKeyService(storage: try GatehouseSQLiteStorageForSpec.open(deployment.databasePath))
            let (_, first) = try await keys.create(name: "one", scopes: ["profile:read"])
            let (_, second) = try await keys.create(name: "two", scopes: ["profile:read"])
            func read(_ key: String) async throws -> Int {
                try await deployment.client.execute(
                    OutboundRequest(url: "\(deployment.gatewayURL)/v1/users/\(uid)", headers: ["Authorization": "Bearer \(key)"])
                ).status
            }
            var serviceStatuses: [Int] = []
            for _ in 0..<4 { serviceStatuses.append(try await read(first)) }
            #expect(serviceStatuses == [200, 200, 200, 429])
            #expect(try await read(second) == 200)
        }
    }
}

extension AccountSecurityTests {
    @Test(
        "behind trusted proxies (a CIDR range), each client has its own sign-in budget: the right-most X-Forwarded-For hop that is not a proxy, so a forged left hop gains nothing"
    )
    func rateLimitsPerClientBehindTrustedProxies() async throws {
        // Stopped: the budgets do not refill while a loaded machine runs the calls.
        let clock = StoppedClock()
        try await withDeployment(gateway: {
            $0.authRateLimitPerMinute = 2
            $0.trustedProxies = ["127.0.0.0/8", "10.0.0.0/8"]
            $0.clock = clock
        }) { deployment async throws in
            func redeem(forwardedFor: String) async throws -> Int {
                try await deployment.client.execute(
                    OutboundRequest(
                        method: "POST", url: "\(deployment.gatewayURL)/v1/auth/result",
                        headers: ["Content-Type": "application/json", "X-Forwarded-For": forwardedFor], body: Array(#"{"result":"unknown"}"#.utf8))
                ).status
            }
            #expect(try await redeem(forwardedFor: "198.51.100.1, 10.0.0.5") == 400)
            #expect(try await redeem(forwardedFor: "198.51.100.1") == 400)
            #expect(try await redeem(forwardedFor: "198.51.100.1") == 429)
            // Another client, though it puts the first one's address on the left.
            #expect(try await redeem(forwardedFor: "198.51.100.1, 198.51.100.2") == 400)
            #expect(try await redeem(forwardedFor: "203.0.113.9, 198.51.100.2, 10.1.2.3") == 400)
            #expect(try await redeem(forwardedFor: "198.51.100.2") == 429)
            // An IPv6 client is counted by its /64, one host's or subscriber's allocation: a new
            // address from it for each request (privacy addresses, or chosen) gets no new budget.
            #expect(try await redeem(forwardedFor: "2001:db8:7:1::1") == 400)
            #expect(try await redeem(forwardedFor: "[2001:db8:7:1:ffff:1:2:3]:4711") == 400)
            #expect(try await redeem(forwardedFor: "2001:db8:7:1:abcd::9") == 429)
            #expect(try await redeem(forwardedFor: "2001:db8:7:2::1") == 400)
            // An IPv4-mapped address is the IPv4 client it maps.
            #expect(try await redeem(forwardedFor: "::ffff:198.51.100.1") == 429)
        }
    }
}

extension AccountSecurityTests {
    @Test(
        "session cookies and service keys naming nothing live are limited per client: past the budget its credentialed requests are 429 before any look-up, other clients unaffected"
    )
    func credentialFailuresLimitedPerClient() async throws {
        // Stopped: the budgets do not refill while a loaded machine runs the calls.
        let clock = StoppedClock()
        try await withDeployment(gateway: {
            $0.credentialFailureLimitPerMinute = 3
            $0.trustedProxies = ["127.0.0.0/8"]
            $0.clock = clock
        }) { deployment in
            var octo = Browser(deployment)
            let signedIn = try await octo.complete(login: "octocat")
            let uid = try account(signedIn).uid
            let idToken = try #require(try jsonObject(signedIn)["idToken"] as? String)
            let (_, key) = try await ServiceKeyService(storage: try GatehouseSQLiteStorageForSpec.open(deployment.databasePath))
                .create(name: "reader", scopes: ["profile:read"])
            func me(cookie: String, from client: String) async throws -> OutboundResponse {
                try await deployment.client.execute(
                    OutboundRequest(
                        url: "\(deployment.gatewayURL)/v1/me", headers: ["Cookie": "gatehouse-session=\(cookie)", "X-Forwarded-For": client]))
            }
            func user(key: String, from client: String) async throws -> Int {
                try await deployment.client.execute(
                    OutboundRequest(
                        url: "\(deployment.gatewayURL)/v1/users/\(uid)", headers: ["Authorization": "Bearer \(key)", "X-Forwarded-For": client])
                ).status
            }
            let session = try #require(octo.jar.cookies["gatehouse-session"])

            var statuses: [Int] = []
            for _ in 0..<3 { statuses.append(try await me(cookie: SecureRandom.token(byteCount: 32), from: "198.51.100.1").status) }
            let misses = ["cache": "account", "result": "miss"]
            let readsBefore = try await ResilienceTests.metric(deployment, "gatehouse_cache_lookups_total", misses)
            let refused = try await me(cookie: SecureRandom.token(byteCount: 32), from: "198.51.100.1")
            statuses.append(refused.status)
            #expect(try await ResilienceTests.metric(deployment, "gatehouse_cache_lookups_total", misses) == readsBefore, "no look-up")
            #expect(statuses == [401, 401, 401, 429])
            #expect(try jsonObject(refused)["code"] as? String == "rate-limited")
            #expect((Int(refused.headers["retry-after"] ?? "") ?? 0) >= 1)
            // Refused before the look-up: the live session's own cookie from that client too.
            #expect(try await me(cookie: session, from: "198.51.100.1").status == 429)
            #expect(try await user(key: key, from: "198.51.100.1") == 429)
            // An ID token is checked by its signature, never counted nor refused.
            let bearer = try await deployment.client.execute(
                OutboundRequest(
                    url: "\(deployment.gatewayURL)/v1/me", headers: ["Authorization": "Bearer \(idToken)", "X-Forwarded-For": "198.51.100.1"]))
            #expect(bearer.status == 200)
            // Another client keeps its budget, and a secret not of the keys' form is never looked up.
            #expect(try await me(cookie: session, from: "198.51.100.2").status == 200)
            for _ in 0..<4 { #expect(try await user(key: "not-a-key", from: "198.51.100.2") == 401) }
            var keyStatuses: [Int] = []
            for _ in 0..<4 { keyStatuses.append(try await user(key: "ghsk_" + SecureRandom.token(byteCount: 32), from: "198.51.100.2")) }
            #expect(keyStatuses == [401, 401, 401, 429])
            #expect(try await user(key: key, from: "198.51.100.3") == 200)
            // A bearer sign-out looks up the cookie sent along too (the console's cookie goes the same way).
            func signOut(from client: String) async throws -> Int {
                try await deployment.client.execute(
                    OutboundRequest(
                        method: "POST", url: "\(deployment.gatewayURL)/v1/auth/signout",
                        headers: [
                            "Authorization": "Bearer forged", "Cookie": "gatehouse-session=\(SecureRandom.token(byteCount: 32))",
                            "X-Forwarded-For": client,
                        ])
                ).status
            }
            var signOuts: [Int] = []
            for _ in 0..<4 { signOuts.append(try await signOut(from: "198.51.100.4")) }
            #expect(signOuts == [204, 204, 204, 429])
            // A bearer sign-out whose cookie is the bearer's own session is no failure: the
            // cookie is looked up before the session ends.
            for round in 0..<4 {
                var again = Browser(deployment)
                let token = try #require(try jsonObject(try await again.complete(login: "octocat"))["idToken"] as? String)
                let cookie = try #require(again.jar.cookies["gatehouse-session"])
                let status = try await deployment.client.execute(
                    OutboundRequest(
                        method: "POST", url: "\(deployment.gatewayURL)/v1/auth/signout",
                        headers: ["Authorization": "Bearer \(token)", "Cookie": "gatehouse-session=\(cookie)", "X-Forwarded-For": "198.51.100.5"])
                ).status
                #expect(status == 204)
                #expect(try await me(cookie: cookie, from: "198.51.100.\(10 + round)").status == 401, "the session ended")
            }
            // The budget refills with time: a token every 20 s at 3 a minute.
            clock.advance(by: 20)
            #expect(try await me(cookie: session, from: "198.51.100.1").status == 200)
        }
    }
}

extension AccountSecurityTests {
    @Test("a signed-out session's genuine ID token is refused again without a read of the store, until it expires")
    func endedSessionsTokensAreRefusedWithoutARead() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let idToken = try #require(try jsonObject(try await browser.complete(login: "octocat"))["idToken"] as? String)
            let bearer: OutboundHeaders = ["Authorization": "Bearer \(idToken)"]
            let me = OutboundRequest(url: "\(deployment.gatewayURL)/v1/me", headers: bearer)
            #expect(try await deployment.client.execute(me).status == 200)
            let signedOut = try await deployment.client.execute(
                OutboundRequest(method: "POST", url: "\(deployment.gatewayURL)/v1/auth/signout", headers: bearer))
            #expect(signedOut.status == 204)
            let misses = ["cache": "account", "result": "miss"]
            let readsBefore = try await ResilienceTests.metric(deployment, "gatehouse_cache_lookups_total", misses) ?? 0
            for _ in 0..<4 {
                let refused = try await deployment.client.execute(me)
                #expect(refused.status == 401)
                #expect(try jsonObject(refused)["code"] as? String == "invalid-id-token")
            }
            let reads = try await ResilienceTests.metric(deployment, "gatehouse_cache_lookups_total", misses) ?? 0
            #expect(reads - readsBefore == 1, "the first refusal read the store, the others did not")
        }
    }
}
