import CurlClient
import Foundation
import GRDB
import GatehouseCore
import Testing

/// GitHub sign-in end to end: gateway and emulator on loopback, real HTTP, real libcurl,
/// a real SQLite file.
@Suite("GitHub sign-in end to end")
struct GitHubSignInTests {
    @Test("full flow: start → authorize → callback → result → /v1/me, photo with ETag/304, provider profile, sign-out; no secret in logs or database")
    func fullFlow() async throws {
        let (logs, secrets) = try await withDeployment { deployment in
            var browser = Browser(deployment)
            let callbackURL = try await browser.authorize(login: "octocat")
            let foundCode = FormEncoding.decode(String(callbackURL.split(separator: "?")[1])).first { $0.0 == "code" }?.1
            let code = try #require(foundCode)
            let foundState = FormEncoding.decode(String(callbackURL.split(separator: "?")[1])).first { $0.0 == "state" }?.1
            let state = try #require(foundState)
            let callback = try await browser.send(callbackURL)
            #expect(callback.status == 303)
            let location = try #require(callback.headers["location"])
            #expect(location.hasPrefix(TestDeployment.returnTo + "#gatehouse_result="))
            let resultID = String(location.split(separator: "=").last ?? "")

            let result = try await browser.result(resultID)
            #expect(result.status == 200)
            let resultJSON = try jsonObject(result)
            #expect(resultJSON["isNewUser"] as? Bool == true)
            #expect(resultJSON["providerId"] as? String == "github.com")
            let additional = try #require(resultJSON["additionalUserInfo"] as? [String: Any])
            #expect(additional["username"] as? String == "octocat")
            #expect((additional["profile"] as? [String: Any])?["login"] as? String == "octocat")
            // A result is handed out once: its retry inside the window sees the same answer,
            // after it nothing.
            let retried = try await browser.result(resultID)
            #expect(retried.status == 200)
            #expect(try jsonObject(retried)["refreshToken"] as? String == resultJSON["refreshToken"] as? String)
            deployment.clock.advance(by: 10)
            let again = try await browser.result(resultID)
            #expect(again.status == 404)
            #expect(try jsonObject(again)["code"] as? String == "result-not-found")

            let me = try await browser.send("\(deployment.gatewayURL)/v1/me")
            #expect(me.status == 200)
            let profile = try jsonObject(me)
            let providers = try #require(profile["providers"] as? [[String: Any]])
            #expect(providers.first?["providerId"] as? String == "github.com")
            #expect(providers.first?["federatedId"] as? String == "583231")
            #expect(providers.first?["username"] as? String == "octocat")
            #expect(profile["email"] as? String == "octocat@github.com")
            #expect(profile["emailVerified"] as? Bool == true)
            let photoURL = try #require(profile["photoURL"] as? String)
            #expect(photoURL.hasPrefix(deployment.gatewayURL + "/"))
            #expect(!me.bodyText.contains(deployment.emulatorURL), "the profile never points at the provider")

            let photo = try await browser.send(photoURL + "?size=96")
            #expect(photo.status == 200)
            #expect(photo.headers["content-type"] == "image/png")
            #expect(Array(photo.body.prefix(4)) == [0x89, 0x50, 0x4E, 0x47])
            // The cache is off here: a miss is streamed (without a tag unless the image was whole
            // before the answer started); a caller who revalidates always gets the tag.
            let tagged = try await browser.send(photoURL + "?size=96", headers: ["If-None-Match": "\"older\""])
            #expect(tagged.body == photo.body)
            let etag = try #require(tagged.headers["etag"])
            #expect(etag.hasPrefix("\"") && !etag.hasPrefix("W/"))
            let notModified = try await browser.send(photoURL + "?size=96", headers: ["If-None-Match": etag])
            #expect(notModified.status == 304)
            #expect(notModified.body.isEmpty)

            let live = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/github.com/profile")
            #expect(live.status == 200)
            let liveJSON = try jsonObject(live)
            #expect((liveJSON["rawUserInfo"] as? [String: Any])?["login"] as? String == "octocat")

            // A second sign-in is the same account, not a new one.
            var second = Browser(deployment)
            let secondResult = try jsonObject(try await second.result(try await second.signIn(login: "octocat")))
            #expect(secondResult["isNewUser"] as? Bool == false)
            #expect((secondResult["user"] as? [String: Any])?["uid"] as? String == profile["uid"] as? String)

            let cookies = Array(browser.jar.cookies.values) + Array(second.jar.cookies.values)
            let signOut = try await browser.send("\(deployment.gatewayURL)/v1/auth/signout", method: "POST")
            #expect(signOut.status == 204)
            let afterSignOut = try await browser.send("\(deployment.gatewayURL)/v1/me")
            #expect(afterSignOut.status == 401)
            #expect(try jsonObject(afterSignOut)["code"] as? String == "unauthenticated")

            // No access token in clear text anywhere in the database files.
            let tokens = await deployment.emulator.issuedAccessTokens()
            #expect(tokens.count == 2)
            var databaseBytes = Data()
            for suffix in ["", "-wal"] {
                databaseBytes += (FileManager.default.contents(atPath: deployment.databasePath + suffix) ?? Data())
            }
            #expect(databaseBytes.count > 0)
            for token in tokens {
                #expect(databaseBytes.range(of: Data(token.utf8)) == nil, "an access token is stored in clear text")
            }

            // Checked once the servers have stopped, so every log line is in.
            return (deployment.logs, tokens + [code, state, TestDeployment.githubClient.secret, resultID] + cookies)
        }
        // No token, code, state, client secret or cookie value in the logs.
        let logText = logs.lines.joined(separator: "\n")
        #expect(logText.contains("sign-in completed"), "the logs were captured")
        for secret in secrets {
            #expect(!logText.contains(secret), "a secret leaked into the logs")
        }
    }

    @Test("private email: the primary verified address from /user/emails")
    func privateEmail() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            _ = try await browser.result(try await browser.signIn(login: "private-pat"))
            let me = try jsonObject(try await browser.send("\(deployment.gatewayURL)/v1/me"))
            #expect(me["email"] as? String == "pat.private@example.com")
            #expect(me["emailVerified"] as? Bool == true)
        }
    }

    @Test("only unverified emails: email null, emailVerified false")
    func unverifiedOnly() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            _ = try await browser.result(try await browser.signIn(login: "unverified-uma"))
            let me = try jsonObject(try await browser.send("\(deployment.gatewayURL)/v1/me"))
            #expect(me["email"] is NSNull)
            #expect(me["emailVerified"] as? Bool == false)
            let provider = try #require((me["providers"] as? [[String: Any]])?.first)
            #expect(provider["email"] is NSNull)
            #expect(provider["emailVerified"] as? Bool == false)
        }
    }

    @Test("tampered, missing, unbound, replayed and expired state → 400 invalid-state, no session, no token request")
    func invalidState() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let callback = try await browser.authorize(login: "octocat")
            let tampered = callback.replacingOccurrences(of: "state=", with: "state=x")
            let withoutState = callback.replacingOccurrences(of: "state=", with: "ignored=")
            for url in [tampered, withoutState] {
                let response = try await browser.send(url)
                #expect(response.status == 400)
                #expect(try jsonObject(response)["code"] as? String == "invalid-state")
                #expect(response.headers["location"] == nil)
            }
            // Each refusal names what is wrong with the state: absent, or longer than any state
            // the gateway issues (not "absent", which would send its reader looking for the wrong fault).
            #expect(try jsonObject(try await browser.send(withoutState))["detail"] as? String == "The callback has no state.")
            let oversized = callback.replacingOccurrences(of: "state=", with: "state=" + String(repeating: "s", count: 600))
            let tooLong = try await browser.send(oversized)
            #expect(tooLong.status == 400)
            #expect(try jsonObject(tooLong)["code"] as? String == "invalid-state")
            #expect((try jsonObject(tooLong)["detail"] as? String)?.contains("longer than") == true)
            // The right state from another browser (no transaction cookie) is refused too.
            var stranger = Browser(deployment)
            let unbound = try await stranger.send(callback)
            #expect(unbound.status == 400)
            #expect(try jsonObject(unbound)["code"] as? String == "invalid-state")

            #expect((try await deployment.emulatorStats())["POST /github/login/oauth/access_token"] == nil)

            // Expired: in a deployment whose transactions live 1 s (its own, so that the other
            // steps here never race that clock on a slow machine).
            try await withDeployment(transactionLifetime: 1) { shortLived in
                var slow = Browser(shortLived)
                let late = try await slow.authorize(login: "octocat")
                shortLived.clock.advance(by: 1.3)
                let expired = try await slow.send(late)
                #expect(expired.status == 400)
                #expect(try jsonObject(expired)["code"] as? String == "invalid-state")
                let holds = slow.jar.cookies.keys.allSatisfy { !$0.contains("session") }
                #expect(holds)
                #expect((try await shortLived.emulatorStats())["POST /github/login/oauth/access_token"] == nil)
            }

            // Replay: a used state is gone.
            let fresh = try await browser.authorize(login: "octocat")
            #expect(try await browser.send(fresh).status == 303)
            let replay = try await browser.send(fresh)
            #expect(replay.status == 400)
            #expect(try jsonObject(replay)["code"] as? String == "invalid-state")
            #expect((try await deployment.emulatorStats())["POST /github/login/oauth/access_token"] == 1)
        }
    }

    @Test("return_to outside the allow-list → 400 invalid-return-to")
    func returnToAllowList() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let bad = [
                "//evil.example/", "https://evil.example/", "https://evil.example@app.example.com/signed-in",
                "https://app.example.com@evil.example/signed-in", "https://app.example.com\\@evil.example/",
                "https://app.example.com/signed-in/../admin",
                "https://app.example.com/signed-in%2f..%2fadmin", "https://app.example.com/other", "http://app.example.com/signed-in",
                "https://app.example.com:8443/signed-in", "https://app.example.com.evil.example/signed-in", "javascript:alert(1)",
                "https://app.example.com/signed-inx", "https://%61pp.example.com/signed-in", "",
            ]
            for value in bad {
                let response = try await browser.start("return_to=\(FormEncoding.escape(value))")
                #expect(response.status == 400, "\(value)")
                #expect(try jsonObject(response)["code"] as? String == "invalid-return-to", "\(value)")
            }
            for good in ["https://app.example.com/signed-in", "https://app.example.com/signed-in/deep?tab=1", "\(deployment.gatewayURL)/"] {
                let response = try await browser.start("return_to=\(FormEncoding.escape(good))")
                #expect(response.status == 302, "\(good)")
            }
        }
    }

    @Test("reserved custom parameters → 400 invalid-custom-parameter; others are forwarded", arguments: CustomParameters.reserved.sorted())
    func reservedParameter(name: String) async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let returnTo = FormEncoding.escape(TestDeployment.returnTo)
            if name != "scope" {
                let refused = try await browser.start("return_to=\(returnTo)&\(name)=x")
                #expect(refused.status == 400)
                #expect(try jsonObject(refused)["code"] as? String == "invalid-custom-parameter")
            }
            let forwarded = try await browser.start("return_to=\(returnTo)&allow_signup=false&login=octocat&scope=gist")
            let location = try #require(forwarded.headers["location"])
            #expect(location.contains("allow_signup=false"))
            #expect(location.contains("login=octocat"))
            #expect(location.contains("scope=read%3Auser%20user%3Aemail%20gist"))
            #expect(location.contains("code_challenge_method=S256"))
        }
    }

    @Test("a code the provider rejects (HTTP 200 with error) → error result, no session, no account")
    func rejectedCode() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let callback = try await browser.authorize(login: "octocat")
            let forged = callback.replacingOccurrences(of: "code=", with: "code=forged")
            let response = try await browser.send(forged)
            #expect(response.status == 303)
            let holds = browser.jar.cookies.keys.allSatisfy { !$0.contains("session") }
            #expect(holds)
            let location = try #require(response.headers["location"])
            let result = try await browser.result(String(location.split(separator: "=").last ?? ""))
            #expect(result.status == 400)
            #expect(result.headers["content-type"] == "application/problem+json")
            #expect(try jsonObject(result)["code"] as? String == "invalid-idp-response")
            #expect((try await deployment.emulatorStats())["POST /github/login/oauth/access_token"] == 1)
            let accounts = try await openSQLite(deployment.databasePath).read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM accounts")
            }
            #expect(accounts == 0)
            let me = try await browser.send("\(deployment.gatewayURL)/v1/me")
            #expect(me.status == 401)
        }
    }
}
