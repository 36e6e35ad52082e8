import CurlClient
import Foundation
import GatehouseCore
import GatehouseTestSupport
import JWTKit
import Testing

/// Gateway ID tokens and refresh tokens, and the browser rules around them.
@Suite("Gateway tokens and browser safety")
struct GatewayTokenTests {
    /// Signs in octocat; returns the browser and the result's tokens.
    static func signedIn(_ deployment: TestDeployment) async throws -> (Browser, idToken: String, refreshToken: String) {
        var browser = Browser(deployment)
        let result = try jsonObject(try await browser.complete(login: "octocat"))
        return (browser, try #require(result["idToken"] as? String), try #require(result["refreshToken"] as? String))
    }

    /// `path` with the ID token as a bearer, on `instance` (default: the first).
    static func bearer(_ deployment: TestDeployment, _ token: String, path: String = "/v1/me", on instance: String? = nil) async throws
        -> OutboundResponse
    {
        try await deployment.client.execute(
            OutboundRequest(url: "\(instance ?? deployment.gatewayURL)\(path)", headers: ["Authorization": "Bearer \(token)"]))
    }

    /// `POST /v1/token` with a refresh token, on `instance` (default: the first).
    static func refresh(_ deployment: TestDeployment, _ token: String, on instance: String? = nil) async throws -> OutboundResponse {
        try await deployment.client.execute(
            OutboundRequest(
                method: "POST", url: "\(instance ?? deployment.gatewayURL)/v1/token",
                headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Array("grant_type=refresh_token&refresh_token=\(FormEncoding.escape(token))".utf8)))
    }

    @Test(
        "the ID token works as a bearer on /v1/me; refresh rotates; a retry inside the window gets the same successor; a reuse after it revokes the family and its ID tokens"
    )
    func refreshRotationAndReuse() async throws {
        try await withDeployment { deployment in
            let (_, idToken, refreshToken) = try await Self.signedIn(deployment)
            let me = try await Self.bearer(deployment, idToken)
            #expect(me.status == 200)
            #expect(try jsonObject(me)["providers"] != nil)

            let first = try await Self.refresh(deployment, refreshToken)
            #expect(first.status == 200, "\(first.bodyText)")
            let rotated = try jsonObject(first)
            let second = try #require(rotated["refreshToken"] as? String)
            #expect(second != refreshToken)
            #expect(rotated["expiresIn"] as? Int == 3600)
            let newIdToken = try #require(rotated["idToken"] as? String)
            #expect(try await Self.bearer(deployment, newIdToken).status == 200)

            // The first refresh token again at once: a retry (its answer may have been lost).
            // The same successor, a fresh ID token, nothing revoked.
            let retry = try await Self.refresh(deployment, refreshToken)
            #expect(retry.status == 200, "\(retry.bodyText)")
            #expect(try jsonObject(retry)["refreshToken"] as? String == second)
            #expect(try await Self.bearer(deployment, try #require(try jsonObject(retry)["idToken"] as? String)).status == 200)

            // After the window: replay. The family ends, the newer token with it.
            deployment.clock.advance(by: 10)
            let replay = try await Self.refresh(deployment, refreshToken)
            #expect(replay.status == 400)
            #expect(try jsonObject(replay)["code"] as? String == "invalid-refresh-token")
            #expect(try await Self.refresh(deployment, second).status == 400)
            let revoked = try await Self.bearer(deployment, newIdToken)
            #expect(revoked.status == 401)
            #expect(try jsonObject(revoked)["code"] as? String == "invalid-id-token")
        }
    }

    @Test(
        "every token error carries RFC 6749's error beside the problem's code: an unsupported grant, a missing token, an unknown one, a body past 8 KiB; a disabled account's grant is invalid_grant with 400, as RFC 6749 §5.2 has it"
    )
    func tokenErrorsNameTheirOAuthError() async throws {
        // No account cache: the disable written to the file beside the gateway is seen at once.
        try await withDeployment(gateway: { $0.accountCacheLifetime = 0 }) { deployment in
            @Sendable func post(_ body: String, path: String = "/v1/token") async throws -> OutboundResponse {
                try await deployment.client.execute(
                    OutboundRequest(
                        method: "POST", url: "\(deployment.gatewayURL)\(path)", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                        body: Array(body.utf8)))
            }
            let cases: [(body: String, status: Int, error: String)] = [
                ("grant_type=password&username=a&password=b", 400, "unsupported_grant_type"),
                ("grant_type=refresh_token", 400, "invalid_request"),
                ("grant_type=refresh_token&refresh_token=unknown", 400, "invalid_grant"),
                ("grant_type=refresh_token&refresh_token=" + String(repeating: "a", count: 9000), 413, "invalid_request"),
            ]
            // Another method, too (405 with Allow).
            let get = try await deployment.client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/v1/token"))
            #expect(get.status == 405 && get.headers["allow"] == "POST", "\(get.bodyText)")
            #expect(try jsonObject(get)["error"] as? String == "invalid_request", "\(get.bodyText)")
            // An account disabled while its session still stands (a disable landing between a
            // refresh's reads): RFC 6749 §5.2's invalid_grant is a 400.
            let (_, _, refreshToken) = try await Self.signedIn(deployment)
            try await openSQLite(deployment.databasePath).write { db in try db.execute(sql: "UPDATE accounts SET disabled = 1") }
            // The router reaches the endpoint through empty path segments too.
            for path in ["/v1/token", "/v1/token/", "//v1//token"] {
                let disabled = try await post("grant_type=refresh_token&refresh_token=\(FormEncoding.escape(refreshToken))", path: path)
                #expect(disabled.status == 400, "\(path): \(disabled.bodyText)")
                let problem = try jsonObject(disabled)
                #expect(problem["code"] as? String == "user-disabled" && problem["status"] as? Int == 400, "\(path): \(disabled.bodyText)")
                #expect(problem["error"] as? String == "invalid_grant", "\(path)")
            }
            for (body, status, error) in cases {
                let answer = try await post(body)
                #expect(answer.status == status, "\(body.prefix(40)): \(answer.bodyText)")
                let problem = try jsonObject(answer)
                #expect(problem["error"] as? String == error, "\(body.prefix(40)): \(answer.bodyText)")
                #expect(problem["error_description"] as? String == problem["detail"] as? String)
                #expect(problem["code"] != nil)
            }
        }
    }

    @Test(
        "a provider's name of any size reaches the tokens as at most 256 characters without controls or bidirectional overrides; an address too long to be one is left out"
    )
    func tokensCarryBoundedProfileText() async throws {
        try await withDeployment { deployment in
            let name = "\u{202E}Olive\u{0007} " + String(repeating: "x", count: 100_000)
            let email = String(repeating: "o", count: 400) + "@oidc.example"
            let userinfo: [String: Any] = ["sub": "248289761001", "name": name, "email": email, "email_verified": true]
            let body = String(decoding: try JSONSerialization.data(withJSONObject: userinfo), as: UTF8.self)
            let fault: [String: Any] = ["endpoint": "GET /oidc/userinfo", "status": 200, "body": body, "times": 1]
            _ = try await deployment.control("faults", String(decoding: try JSONSerialization.data(withJSONObject: fault), as: UTF8.self))
            var browser = Browser(deployment)
            let result = try jsonObject(try await browser.complete(login: "olive@oidc.example", provider: "oidc.emulator"))
            let refreshed = try jsonObject(try await Self.refresh(deployment, try #require(result["refreshToken"] as? String)))
            for token in [result["idToken"] as? String, refreshed["idToken"] as? String] {
                let payload = try #require(token?.split(separator: ".").dropFirst().first)
                let claims = try #require(try JSONSerialization.jsonObject(with: Base64URL.decode(String(payload)) ?? Data()) as? [String: Any])
                let carried = try #require(claims["name"] as? String)
                #expect(carried.count == 256 && carried.hasPrefix("Olive xxx"), "\(carried.prefix(20))")
                #expect(claims["email"] == nil && claims["email_verified"] as? Bool == false)
                #expect((token?.utf8.count ?? .max) < 4_000)
            }
        }
    }

    @Test(
        "a session makes GATEHOUSE_SESSION_REFRESH_LIMIT refreshes: the next answers invalid-refresh-token and ends the session, its ID tokens with it; another session of the user keeps its own count"
    )
    func aSessionRefreshesUpToItsLimit() async throws {
        try await withDeployment(gateway: { $0.sessionRefreshLimit = 3 }) { deployment in
            let (_, _, first) = try await Self.signedIn(deployment)
            let (_, _, other) = try await Self.signedIn(deployment)
            var token = first
            var idToken = ""
            for _ in 0..<3 {
                let rotated = try await Self.refresh(deployment, token)
                #expect(rotated.status == 200, "\(rotated.bodyText)")
                token = try #require(try jsonObject(rotated)["refreshToken"] as? String)
                idToken = try #require(try jsonObject(rotated)["idToken"] as? String)
            }
            #expect(try await Self.bearer(deployment, idToken).status == 200)
            let fourth = try await Self.refresh(deployment, token)
            #expect(fourth.status == 400, "\(fourth.bodyText)")
            #expect(try jsonObject(fourth)["code"] as? String == "invalid-refresh-token")
            #expect(try jsonObject(fourth)["error"] as? String == "invalid_grant")
            #expect(try await Self.bearer(deployment, idToken).status == 401, "the session ended")
            #expect(try await Self.refresh(deployment, token).status == 400)
            let holds = deployment.logs.lines.contains { $0.contains("session ended: it made its 3 refreshes") }
            #expect(holds)
            #expect(try await Self.refresh(deployment, other).status == 200)
        }
    }

    @Test(
        "retry window: every retry of the last rotation gets the same successor; once the successor is spent, the predecessor revokes the family, an older token too; 0 is strict"
    )
    func refreshRetryWindow() async throws {
        // Ten minutes' window, 50 s of it passed: the retries are well inside it however slow
        // the machine is between two requests.
        try await withDeployment(gateway: { $0.refreshRetryWindow = 600 }) { deployment in
            let (_, _, first) = try await Self.signedIn(deployment)
            let rotated = try await Self.refresh(deployment, first)
            let second = try #require(try jsonObject(rotated)["refreshToken"] as? String)
            deployment.clock.advance(by: 50)
            for _ in 0..<3 {
                let retry = try await Self.refresh(deployment, first)
                #expect(retry.status == 200, "\(retry.bodyText)")
                #expect(try jsonObject(retry)["refreshToken"] as? String == second)
            }
            // The successor is spent: the window of its predecessor is over, whatever the clock says.
            let third = try #require(try jsonObject(try await Self.refresh(deployment, second))["refreshToken"] as? String)
            #expect(try await Self.refresh(deployment, first).status == 400, "a token two rotations old never gets a window")
            #expect(try await Self.refresh(deployment, third).status == 400, "its reuse revoked the family")
            let holds = deployment.logs.lines.contains { $0.contains("refresh token reused") }
            #expect(holds)

            let (_, _, token) = try await Self.signedIn(deployment)
            let next = try #require(try jsonObject(try await Self.refresh(deployment, token))["refreshToken"] as? String)
            _ = try await Self.refresh(deployment, next)
            // The successor was spent: a retry of the first rotation is a reuse.
            #expect(try await Self.refresh(deployment, token).status == 400)
        }
        try await withDeployment(gateway: { $0.refreshRetryWindow = 0 }) { strict in
            let (_, _, first) = try await Self.signedIn(strict)
            let second = try #require(try jsonObject(try await Self.refresh(strict, first))["refreshToken"] as? String)
            #expect(try await Self.refresh(strict, first).status == 400)
            #expect(try await Self.refresh(strict, second).status == 400)
        }
    }

    @Test(
        "a result redeemed again with the same verifier inside the window answers the same tokens; another verifier, a late retry or a used token find nothing"
    )
    func resultRetryWindow() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let id = try await browser.signIn(login: "octocat")
            let first = try await browser.result(id)
            #expect(first.status == 200, "\(first.bodyText)")
            let again = try await browser.result(id)
            #expect(again.status == 200, "\(again.bodyText)")
            #expect(again.body == first.body, "a retry answers byte for byte the same")
            let (tokens, same) = (try jsonObject(first), try jsonObject(again))
            #expect(same["refreshToken"] as? String == tokens["refreshToken"] as? String)
            #expect(same["idToken"] as? String == tokens["idToken"] as? String)
            #expect(same["user"] != nil)
            // A stolen id with another verifier finds nothing, inside the window too.
            var thief = Browser(deployment)
            #expect(try await thief.result(id).status == 404)
            deployment.clock.advance(by: 10)
            #expect(try await browser.result(id).status == 404)

            // Once the answered refresh token was used, the answer is no longer handed out.
            let other = try await browser.signIn(login: "octocat")
            let answer = try jsonObject(try await browser.result(other))
            #expect(try await Self.refresh(deployment, try #require(answer["refreshToken"] as? String)).status == 200)
            #expect(try await browser.result(other).status == 404)
        }
    }

    @Test("forged, tampered, alg:none and expired gateway ID tokens are refused with 401")
    func badTokens() async throws {
        try await withDeployment { deployment in
            let (_, idToken, _) = try await Self.signedIn(deployment)
            let parts = idToken.split(separator: ".").map(String.init)
            var claims = try #require(try JSONSerialization.jsonObject(with: Base64URL.decode(parts[1]) ?? Data()) as? [String: Any])
            claims["sub"] = "someone-else"
            let tampered = "\(parts[0]).\(Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))).\(parts[2])"
            let header = try #require(try JSONSerialization.jsonObject(with: Base64URL.decode(parts[0]) ?? Data()) as? [String: Any])
            let none = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: ["alg": "none", "kid": header["kid"] as Any])))
            let unsigned = "\(none).\(parts[1])."
            // A valid ES256 signature by a key the gateway does not publish, under its kid.
            let forged = try await ForeignSigner.sign(payload: parts[1], kid: header["kid"] as? String ?? "")
            for token in [tampered, unsigned, forged, "not-a-jwt", idToken + "x"] {
                let answer = try await Self.bearer(deployment, token)
                #expect(answer.status == 401, "\(token.prefix(20))…")
                #expect(try jsonObject(answer)["code"] as? String == "invalid-id-token")
            }

            try await withDeployment(gateway: { $0.idTokenLifetime = -120 }) { expiring in
                let (_, expired, _) = try await Self.signedIn(expiring)
                let answer = try await Self.bearer(expiring, expired)
                #expect(answer.status == 401)
                #expect(try jsonObject(answer)["code"] as? String == "id-token-expired")
            }
        }
    }

    @Test("an ID token never outlives its session: minted ten minutes before the session ends, it expires when the session does")
    func idTokenEndsWithItsSession() async throws {
        try await withDeployment { deployment in
            let (_, _, refreshToken) = try await Self.signedIn(deployment)
            // Seven days (the session's lifetime) less ten minutes on.
            deployment.clock.advance(by: 7 * 24 * 3600 - 600)
            let refreshed = try await Self.refresh(deployment, refreshToken)
            #expect(refreshed.status == 200, "\(refreshed.bodyText)")
            let object = try jsonObject(refreshed)
            let expiresIn = try #require(object["expiresIn"] as? Int)
            #expect(expiresIn <= 600 && expiresIn >= 590, "\(expiresIn)")
            // The token's own `exp` says the same to a service verifying it offline.
            let token = try #require(object["idToken"] as? String)
            let payload = try #require(Base64URL.decode(String(token.split(separator: ".")[1])))
            let claims = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
            let (exp, iat) = (try #require(claims["exp"] as? Int), try #require(claims["iat"] as? Int))
            #expect(exp - iat == expiresIn)
        }
    }

    @Test(
        "sign-out ends what it says or says why not: a bearer with another session's cookie ends both; an expired bearer is 401 id-token-expired and ends nothing; one whose session has ended is 204"
    )
    func signOutEndsWhatItSays() async throws {
        try await withDeployment { deployment in
            let signOut = "\(deployment.gatewayURL)/v1/auth/signout"
            let (_, idToken, _) = try await Self.signedIn(deployment)
            var (cookieBrowser, _, _) = try await Self.signedIn(deployment)
            // The bearer's session and the cookie's, which the answer tells the browser to drop:
            // a copy of that cookie kept elsewhere no longer works either.
            let copied = cookieBrowser.jar.header
            #expect(try await deployment.client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/v1/me", headers: copied)).status == 200)
            let both = try await cookieBrowser.send(signOut, method: "POST", headers: ["Authorization": "Bearer \(idToken)"])
            #expect(both.status == 204)
            #expect(try await Self.bearer(deployment, idToken).status == 401)
            #expect(try await deployment.client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/v1/me", headers: copied)).status == 401)
            // Each ended session is in the audit trail.
            #expect(ProviderAPITests.apiAuditLines(deployment, event: "session.signed-out").count == 2)
            // A token whose session has ended: nothing is left to end.
            let ended = try await deployment.client.execute(
                OutboundRequest(method: "POST", url: signOut, headers: ["Authorization": "Bearer \(idToken)"]))
            #expect(ended.status == 204)

            // An hour on, the ID token has expired but its session lives: the caller is told, and
            // refreshes before it signs out; nothing was ended meanwhile.
            let (_, stale, refreshToken) = try await Self.signedIn(deployment)
            deployment.clock.advance(by: 3600 + 61)  // past the minute of clock skew allowed
            let expired = try await deployment.client.execute(
                OutboundRequest(method: "POST", url: "\(signOut)?all=true", headers: ["Authorization": "Bearer \(stale)"]))
            try #expect(expired.status == 401 && (try jsonObject(expired)["code"] as? String) == "id-token-expired", "\(expired.bodyText)")
            #expect(expired.headers["set-cookie"] == nil)
            #expect(try await Self.refresh(deployment, refreshToken).status == 200)
        }
    }

    @Test("sign-out with the bearer token ends its session: the ID token and refresh token stop working; the cookie session of another sign-in stays")
    func signOutRevokes() async throws {
        try await withDeployment { deployment in
            var (browser, idToken, refreshToken) = try await Self.signedIn(deployment)
            let (_, otherIdToken, _) = try await Self.signedIn(deployment)
            let out = try await deployment.client.execute(
                OutboundRequest(method: "POST", url: "\(deployment.gatewayURL)/v1/auth/signout", headers: ["Authorization": "Bearer \(idToken)"]))
            #expect(out.status == 204)
            #expect(try await Self.bearer(deployment, idToken).status == 401)
            #expect(try await Self.refresh(deployment, refreshToken).status == 400)
            // That sign-in's cookie belonged to the same session.
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me").status == 401)
            #expect(try await Self.bearer(deployment, otherIdToken).status == 200)

            // Disabling the user ends every session.
            let admin = try await KeysCommandTests.run(
                [
                    "keys", "create-service", "admin", "--scopes", "admin", "--data-dir",
                    (deployment.databasePath as NSString).deletingLastPathComponent,
                ],
                environment: ["GATEHOUSE_ENCRYPTION_KEY": deployment.vaultKey.base64EncodedString()])
            #expect(admin.status == 0)
            let key = try #require(admin.output.split(separator: "\n").last.map(String.init))
            let uid = try account(try await Self.bearer(deployment, otherIdToken)).uid
            let disabled = try await deployment.client.execute(
                OutboundRequest(method: "POST", url: "\(deployment.gatewayURL)/v1/users/\(uid)/disable", headers: ["Authorization": "Bearer \(key)"]))
            #expect(disabled.status == 204)
            #expect(try await Self.bearer(deployment, otherIdToken).status == 401)
        }
    }

    @Test("JWKS and openid-configuration verify the ID token with an independent library (PyJWT)")
    func independentVerification() async throws {
        let python = try #require(
            ProcessInfo.processInfo.environment["GATEHOUSE_TEST_PYJWT_PYTHON"],
            "set GATEHOUSE_TEST_PYJWT_PYTHON to a python with PyJWT[crypto] (scripts/test does)")
        try await withDeployment { deployment in
            let (_, idToken, _) = try await Self.signedIn(deployment)
            let script = """
                import json, sys, urllib.request, jwt
                base, token = sys.argv[1], sys.argv[2]
                config = json.load(urllib.request.urlopen(base + "/.well-known/openid-configuration"))
                assert config["issuer"] == base, config
                keys = jwt.PyJWKClient(config["jwks_uri"])
                key = keys.get_signing_key_from_jwt(token)
                claims = jwt.decode(token, key.key, algorithms=["ES256"], audience=base, issuer=base,
                                    options={"require": ["exp", "iat", "sub", "auth_time"]})
                print(claims["sub"], claims["sign_in_provider"], ",".join(sorted(claims["identities"])))
                try:
                    jwt.decode(token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"), key.key, algorithms=["ES256"], audience=base)
                    print("TAMPERED-ACCEPTED")
                except jwt.InvalidSignatureError:
                    print("tampered-refused")
                """
            let run = try await Self.output(python, ["-c", script, deployment.gatewayURL, idToken])
            #expect(run.status == 0, "\(run.output)")
            let lines = run.output.split(separator: "\n").map(String.init)
            #expect(lines.first?.hasSuffix(" github.com github.com") == true, "\(run.output)")
            #expect(lines.last == "tampered-refused")
        }
    }

    @Test(
        "signing-key rotation: the new key is published first and signs three reload intervals later, the JWKS cached for at most one; tokens from before and after both verify"
    )
    func signingKeyRotation() async throws {
        try await withDeployment(gateway: { $0.signingKeyReloadInterval = 1 }) { deployment in
            let (_, before, refreshToken) = try await Self.signedIn(deployment)
            func kid(_ token: String) throws -> String? {
                try (JSONSerialization.jsonObject(with: Base64URL.decode(String(token.split(separator: ".")[0])) ?? Data()) as? [String: Any])?["kid"]
                    as? String
            }
            let rotation = ContinuousClock.now
            let rotated = try await KeysCommandTests.run(
                ["keys", "rotate-signing", "--data-dir", (deployment.databasePath as NSString).deletingLastPathComponent],
                environment: ["GATEHOUSE_ENCRYPTION_KEY": deployment.vaultKey.base64EncodedString()])
            #expect(rotated.status == 0)
            // Published within a reload interval (1 s here), signing after three (the gateway's
            // clock runs 1.2 s ahead of the machine's from here on); a cached JWKS lives one.
            deployment.clock.advance(by: 1.2)
            let jwksAnswer = try await deployment.client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/.well-known/jwks.json"))
            #expect(jwksAnswer.headers["cache-control"] == "public, max-age=1")
            let published = try jsonObject(jwksAnswer)
            #expect((published["keys"] as? [Any])?.count == 2)
            let earlyAnswer = try jsonObject(try await Self.refresh(deployment, refreshToken))
            let early = try #require(earlyAnswer["refreshToken"] as? String)
            if ContinuousClock.now - rotation + .milliseconds(1200) < .seconds(3) {
                // Less than three reload intervals since the key was stored: the old key still signs.
                #expect(try kid(try #require(earlyAnswer["idToken"] as? String)) == kid(before))
            }
            // Two seconds later (more than three reload intervals after the key was stored, the
            // next reload due) the new key takes over.
            deployment.clock.advance(by: 2)
            let answer = try jsonObject(try await Self.refresh(deployment, early))
            let after = try #require(answer["idToken"] as? String)
            #expect(try kid(before) != kid(after))
            let jwks = try jsonObject(try await deployment.client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/.well-known/jwks.json")))
            let kids = Set((jwks["keys"] as? [[String: Any]] ?? []).compactMap { $0["kid"] as? String })
            let holds = try kids == [kid(before), kid(after)].compactMap { $0 }.reduce(into: Set<String>()) { $0.insert($1) }
            #expect(holds)
            #expect(try await Self.bearer(deployment, before).status == 200)
            #expect(try await Self.bearer(deployment, after).status == 200)
        }
    }

    /// Runs a program; its exit status and standard output (and error).
    static func output(_ program: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let child = try SpawnedProcess.start(program, arguments, output: .pipe)
        let output = await child.output()
        return (SpawnedProcess.exitCode(await child.exited()) ?? -1, output)
    }
}

/// Signs claims with a fresh P-256 key the gateway has never seen (a forger's token).
enum ForeignSigner {
    static func sign(payload: String, kid: String) async throws -> String {
        let claims = try JSONDecoder().decode(GatewayIDTokenClaims.self, from: Base64URL.decode(payload) ?? Data())
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: ES256PrivateKey(), kid: JWKIdentifier(string: kid))
        return try await keys.sign(claims, kid: JWKIdentifier(string: kid))
    }
}
