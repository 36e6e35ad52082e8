import CurlClient
import Foundation
import GRDB
import GatehouseCore
import JWTKit
import ProviderEmulator
import Testing

/// Sign-in with OpenID Connect providers (the emulator's standard issuer as `oidc.emulator`
/// and its Yahoo as `yahoo.com`), end to end over loopback with real signatures.
@Suite("OpenID Connect sign-in")
struct OIDCSignInTests {
    static let olive = "olive@oidc.example"
    static let yuki = "yuki@yahoo.example"

    /// Signs in and returns the result's JSON and HTTP status.
    static func signIn(_ browser: inout Browser, login: String, provider: String) async throws -> (status: Int, json: [String: Any]) {
        let id = try await browser.signIn(login: login, provider: provider)
        let result = try await browser.result(id)
        return (result.status, try jsonObject(result))
    }

    @Test("generic OIDC: full flow with RFC 9207 iss, unified profile, live userinfo profile, photo through the gateway")
    func genericFullFlow() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let callback = try await browser.authorize(login: Self.olive, provider: "oidc.emulator")
            #expect(callback.contains("iss="))
            let completed = try await browser.send(callback)
            let id = String(try #require(completed.headers["location"]).split(separator: "=").last ?? "")
            let result = try await browser.result(id)
            #expect(result.status == 200)
            let json = try jsonObject(result)
            #expect(json["providerId"] as? String == "oidc.emulator")
            let user = try #require(json["user"] as? [String: Any])
            #expect(user["email"] as? String == Self.olive)
            #expect(user["emailVerified"] as? Bool == true)
            #expect(user["givenName"] as? String == "Olive")
            #expect(user["locale"] as? String == "en-GB")
            #expect((user["photoURL"] as? String)?.hasPrefix(deployment.gatewayURL) == true)
            let providers = try #require(user["providers"] as? [[String: Any]])
            #expect(providers.first?["federatedId"] as? String == "248289761001")

            let live = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/oidc.emulator/profile")
            #expect(live.status == 200)
            #expect(try jsonObject(live)["federatedId"] as? String == "248289761001")
            let photo = try await browser.send("\(deployment.gatewayURL)/v1/me/photo")
            #expect(photo.status == 200)
            #expect(photo.headers["content-type"] == "image/png")
            #expect(Array(photo.body.prefix(4)) == [0x89, 0x50, 0x4E, 0x47])

            // Discovery and JWKS are cached: a second sign-in fetches neither again.
            var second = Browser(deployment)
            #expect(try await Self.signIn(&second, login: Self.olive, provider: "oidc.emulator").status == 200)
            let stats = try await deployment.emulatorStats()
            #expect(stats["GET /oidc/.well-known/openid-configuration"] == 1)
            #expect(stats["GET /oidc/jwks"] == 1)
            #expect(stats["POST /oidc/token"] == 2)
            #expect(stats["GET /oidc/userinfo"] == 3)
            try await Self.expectNoSecretsLogged(deployment)
        }
    }

    @Test(
        "a live profile whose userinfo says the address verified at sign-in is not verified any more unverifies it; the next that vouches for it verifies it again"
    )
    func userinfoUnverifiesTheAddress() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let signedIn = try await Self.signIn(&browser, login: Self.olive, provider: "oidc.emulator")
            #expect((signedIn.json["user"] as? [String: Any])?["emailVerified"] as? Bool == true)
            let profile = "\(deployment.gatewayURL)/v1/me/providers/oidc.emulator/profile?refresh=true"
            #expect(try await deployment.control("oidc/tamper", #"{"issuer": "oidc", "mode": "userinfo-email-unverified"}"#).status == 201)
            let unverified = try await browser.send(profile)
            #expect(unverified.status == 200)
            #expect(try jsonObject(unverified)["email"] as? String == Self.olive)
            #expect(try jsonObject(unverified)["emailVerified"] as? Bool == false)
            #expect(try jsonObject(try await browser.send("\(deployment.gatewayURL)/v1/me"))["emailVerified"] as? Bool == false)
            let verified = try await browser.send(profile)
            #expect(try jsonObject(verified)["emailVerified"] as? Bool == true)
            #expect(try jsonObject(try await browser.send("\(deployment.gatewayURL)/v1/me"))["emailVerified"] as? Bool == true)
        }
    }

    @Test("Yahoo: ES256 ID token, GUID subject, userinfo profile; an unverified email is never marked verified")
    func yahooFlow() async throws {
        try await withDeployment { deployment in
            let jwks = try await deployment.client.execute(OutboundRequest(url: "\(deployment.emulatorURL)/yahoo/openid/v1/certs"))
            #expect(jwks.bodyText.contains(#""kty":"EC""#))
            var browser = Browser(deployment)
            let verified = try await Self.signIn(&browser, login: Self.yuki, provider: "yahoo.com")
            #expect(verified.status == 200)
            let user = try #require(verified.json["user"] as? [String: Any])
            #expect((user["providers"] as? [[String: Any]])?.first?["federatedId"] as? String == "UQIDWJNWVNQD4GXZ5NGMZUSTQ4")
            #expect(user["emailVerified"] as? Bool == true)
            let holds =
                (verified.json["additionalUserInfo"] as? [String: Any]).flatMap { $0["profile"] as? [String: Any] }?["sub"] as? String
                == "UQIDWJNWVNQD4GXZ5NGMZUSTQ4"
            #expect(holds)

            var other = Browser(deployment)
            let unverified = try await Self.signIn(&other, login: "yan@yahoo.example", provider: "yahoo.com")
            let yan = try #require(unverified.json["user"] as? [String: Any])
            #expect(yan["email"] as? String == "yan@yahoo.example")
            #expect(yan["emailVerified"] as? Bool == false)
            #expect(try await deployment.emulatorStats()["POST /yahoo/oauth2/get_token"] == 2)
            try await Self.expectNoSecretsLogged(deployment)
        }
    }

    @Test("Yahoo custom parameters: prompt and language forwarded, scope= added to the defaults, reserved names refused")
    func yahooCustomParameters() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let returnTo = FormEncoding.escape(TestDeployment.returnTo)
            let start = try await browser.start("return_to=\(returnTo)&prompt=login&language=fr&scope=sdct-w", provider: "yahoo.com")
            #expect(start.status == 302)
            let query = Dictionary(
                uniqueKeysWithValues: FormEncoding.decode(String(try #require(start.headers["location"]).split(separator: "?")[1])).map {
                    ($0.0, $0.1)
                })
            #expect(query["prompt"] == "login")
            #expect(query["language"] == "fr")
            #expect(query["scope"] == "openid profile email sdct-w")
            #expect(query["nonce"]?.count == 43 && query["code_challenge_method"] == "S256")
            for reserved in ["client_id", "redirect_uri", "response_type", "state", "nonce", "request", "Request_URI"] {
                let refused = try await browser.start("return_to=\(returnTo)&\(reserved)=x", provider: "yahoo.com")
                #expect(refused.status == 400)
                #expect(try jsonObject(refused)["code"] as? String == "invalid-custom-parameter")
            }
        }
    }

    /// Each tamper mode and the error code the gateway must answer with.
    static let rejections: [(mode: String, code: String)] = [
        ("wrong-iss", "invalid-id-token"), ("wrong-aud", "invalid-id-token"), ("extra-aud", "invalid-id-token"),
        ("expired", "id-token-expired"), ("far-expiry", "invalid-id-token"), ("bad-signature", "invalid-id-token"), ("alg-none", "invalid-id-token"),
        ("hs256-public-key", "invalid-id-token"), ("missing-sub", "invalid-id-token"), ("wrong-nonce", "missing-or-invalid-nonce"),
        ("missing-nonce", "missing-or-invalid-nonce"), ("jku-header", "invalid-id-token"), ("jwk-header", "invalid-id-token"),
        ("callback-iss-wrong", "invalid-idp-response"), ("callback-iss-missing", "invalid-idp-response"),
        ("userinfo-sub-mismatch", "invalid-idp-response"),
    ]

    @Test("a bad ID token, callback iss or userinfo subject → error result, no session, no account", arguments: rejections.map(\.mode))
    func rejection(mode: String) async throws {
        let foundExpected = Self.rejections.first { $0.mode == mode }?.code
        let expected = try #require(foundExpected)
        try await withDeployment { deployment in
            let armed = try await deployment.control("oidc/tamper", #"{"issuer": "oidc", "mode": "\#(mode)"}"#)
            #expect(armed.status == 201)
            var browser = Browser(deployment)
            let (status, json) = try await Self.signIn(&browser, login: Self.olive, provider: "oidc.emulator")
            #expect(status >= 400)
            #expect(json["code"] as? String == expected, "mode \(mode): \(json)")
            let holds = browser.jar.cookies.keys.allSatisfy { !$0.contains("session") }
            #expect(holds)
            #expect(try await deployment.accountCount() == 0)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me").status == 401)
            // Nothing is sent to the userinfo endpoint before the ID token passed.
            if expected != "invalid-idp-response" {
                #expect(try await deployment.emulatorStats()["GET /oidc/userinfo"] == nil)
            }
        }
    }

    @Test("discovery naming another issuer disables that provider with a clear reason; the others still work")
    func discoveryIssuerMismatch() async throws {
        let oidc = EmulatorConfigurationClients.oidc
        try await withDeployment(extraProviders: { base in
            // The emulator's document says `…/oidc`; this configuration expects `…/oidc/`.
            [OIDCProviderConfiguration(providerId: "oidc.mismatch", issuer: "\(base)/oidc/", clientID: oidc.id, clientSecret: oidc.secret)]
        }) { deployment in
            var browser = Browser(deployment)
            let start = try await browser.start("return_to=\(FormEncoding.escape(TestDeployment.returnTo))", provider: "oidc.mismatch")
            #expect(start.status == 503)
            #expect(try jsonObject(start)["code"] as? String == "provider-misconfigured")
            #expect(browser.jar.cookies.isEmpty)
            let ready = try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/readyz"))
            #expect(ready.status == 200)
            let readiness = try jsonObject(ready)
            let disabled = try #require(readiness["disabledProviders"] as? [String: String])
            #expect(disabled["oidc.mismatch"]?.contains("issuer") == true)
            #expect((readiness["providers"] as? [String])?.contains("oidc.mismatch") == false)
            let holds = deployment.logs.lines.contains { $0.contains("OIDC provider disabled") && $0.contains("oidc.mismatch") }
            #expect(holds)
            #expect(try await Self.signIn(&browser, login: Self.olive, provider: "oidc.emulator").status == 200)
        }
    }

    @Test("key rotation at the provider: the next sign-in succeeds after exactly one JWKS refetch")
    func keyRotation() async throws {
        try await withDeployment(openID: { $0.jwksRefetchCooldown = 0 }) { deployment async throws in
            var first = Browser(deployment)
            #expect(try await Self.signIn(&first, login: Self.olive, provider: "oidc.emulator").status == 200)
            #expect(try await deployment.control("rotate-keys", "{}").status == 200)
            var second = Browser(deployment)
            #expect(try await Self.signIn(&second, login: Self.olive, provider: "oidc.emulator").status == 200)
            #expect(try await deployment.emulatorStats()["GET /oidc/jwks"] == 2)
        }
    }

    @Test("JWKS endpoint down: a warm cache keeps signing in; a cold cache fails closed")
    func jwksOutage() async throws {
        // Warm: keys cached, then the cache ages out while the JWKS endpoint answers 503.
        try await withDeployment(openID: { $0.metadataLifetime = 0.3 }) { warm in
            var browser = Browser(warm)
            #expect(try await Self.signIn(&browser, login: Self.olive, provider: "oidc.emulator").status == 200)
            try await warm.control("faults", #"{"endpoint": "GET /oidc/jwks", "status": 503}"#)
            // Past the lifetime and the refetch cooldown (30 s): one refetch is tried, fails,
            // and the cached keys keep verifying.
            warm.clock.advance(by: 31)
            var again = Browser(warm)
            #expect(try await Self.signIn(&again, login: Self.olive, provider: "oidc.emulator").status == 200)
            #expect(try await warm.emulatorStats()["GET /oidc/jwks"] ?? 0 >= 2)
        }

        try await withDeployment { cold in
            try await cold.control("faults", #"{"endpoint": "GET /oidc/jwks", "status": 503}"#)
            var coldBrowser = Browser(cold)
            let (status, json) = try await Self.signIn(&coldBrowser, login: Self.olive, provider: "oidc.emulator")
            #expect(status == 502)
            #expect(json["code"] as? String == "upstream-unavailable")
            #expect(try await cold.accountCount() == 0)
        }
    }

    /// Mints an ID token at the emulator's control path.
    static func mint(_ deployment: TestDeployment, issuer: String, hint: String, extra: String = "") async throws -> String {
        let response = try await deployment.control("oidc/id-token", #"{"issuer": "\#(issuer)", "hint": "\#(hint)"\#(extra)}"#)
        return try #require(try jsonObject(response)["idToken"] as? String)
    }

    static func idTokenSignIn(_ browser: inout Browser, _ body: String) async throws -> OutboundResponse {
        try await browser.send(
            "\(browser.deployment.gatewayURL)/v1/auth/idtoken", method: "POST", headers: ["Content-Type": "application/json"],
            body: Array(body.utf8))
    }

    @Test("ID-token sign-in: good token with rawNonce, foreign aud, wrong rawNonce, access token only, forged kid")
    func idTokenSignIn() async throws {
        try await withDeployment { deployment in
            let rawNonce = "a-raw-nonce-from-the-app"
            let good = try await Self.mint(deployment, issuer: "oidc", hint: Self.olive, extra: #", "nonce": "\#(SecureRandom.digest(rawNonce))""#)
            var browser = Browser(deployment)
            let signedIn = try await Self.idTokenSignIn(
                &browser, #"{"providerId": "oidc.emulator", "idToken": "\#(good)", "rawNonce": "\#(rawNonce)"}"#)
            #expect(signedIn.status == 200)
            #expect((try jsonObject(signedIn)["user"] as? [String: Any])?["email"] as? String == Self.olive)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me").status == 200)

            // Spent, however it is written again: a signature whose last character differs in
            // bits that decode to nothing, or with padding, is the same token (and an ECDSA
            // signature's other s would be too: the replay key is what the signature signs).
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
            let foundLast = good.last.flatMap { alphabet.firstIndex(of: $0) }
            let last = try #require(foundLast)
            let rewritten = String(good.dropLast()) + String(alphabet[last ^ 1])
            for variant in [good, rewritten, good + "=", good + "==", rewritten + "="] {
                var replay = Browser(deployment)
                let answer = try await Self.idTokenSignIn(
                    &replay, #"{"providerId": "oidc.emulator", "idToken": "\#(variant)", "rawNonce": "\#(rawNonce)"}"#)
                #expect(answer.status == 400, "\(variant.suffix(4)): \(answer.bodyText)")
                #expect(try jsonObject(answer)["code"] as? String == "invalid-idp-response")
                let holds = replay.jar.cookies.keys.allSatisfy { !$0.contains("session") }
                #expect(holds)
            }

            var other = Browser(deployment)
            let wrongNonce = try await Self.idTokenSignIn(&other, #"{"providerId": "oidc.emulator", "idToken": "\#(good)", "rawNonce": "other"}"#)
            #expect(wrongNonce.status == 400)
            #expect(try jsonObject(wrongNonce)["code"] as? String == "missing-or-invalid-nonce")

            let foreign = try await Self.mint(deployment, issuer: "oidc", hint: Self.olive, extra: #", "audience": "another-client""#)
            let refused = try await Self.idTokenSignIn(&other, #"{"providerId": "oidc.emulator", "idToken": "\#(foreign)"}"#)
            #expect(refused.status == 400)
            #expect(try jsonObject(refused)["code"] as? String == "invalid-idp-response")

            let accessOnly = try await Self.idTokenSignIn(&other, #"{"providerId": "yahoo.com", "accessToken": "some-access-token"}"#)
            #expect(accessOnly.status == 400)
            #expect(try jsonObject(accessOnly)["code"] as? String == "operation-not-allowed")

            // Tokens signed with keys the issuer never published: at most one JWKS refetch, however many arrive.
            let before = try await deployment.emulatorStats()["GET /oidc/jwks"] ?? 0
            let attacker = JWTKeyCollection()
            await attacker.add(ecdsa: ES256PrivateKey(), kid: "attacker")
            let claims = try JSONDecoder().decode(
                IDTokenClaims.self,
                from: Data(
                    #"{"iss": "\#(deployment.emulatorURL)/oidc", "sub": "248289761001", "aud": "gatehouse-demo-oidc", "exp": \#(Int(Date().timeIntervalSince1970) + 600), "iat": \#(Int(Date().timeIntervalSince1970))}"#
                        .utf8))
            for _ in 0..<5 {
                let forged = try await attacker.sign(claims, kid: "attacker")
                let answer = try await Self.idTokenSignIn(&other, #"{"providerId": "oidc.emulator", "idToken": "\#(forged)"}"#)
                #expect(answer.status == 400)
                #expect(try jsonObject(answer)["code"] as? String == "invalid-idp-response")
            }
            let after = try await deployment.emulatorStats()["GET /oidc/jwks"] ?? 0
            #expect(after - before <= 1)
            let holds2 = other.jar.cookies.keys.allSatisfy { !$0.contains("session") }
            #expect(holds2)
            #expect(try await deployment.accountCount() == 1)
        }
    }

    @Test(
        "an ID token brings no grant: linking the identity already linked keeps its code flow's grant, and a sign-in held at its hook while that grant is refreshed does not write the old one back"
    )
    func idTokenKeepsTheGrant() async throws {
        // `allow`: the held sign-in goes on when its hook is released or, on a machine so loaded
        // that the refresh below outlasts the hook's 10 s, when the call times out; either way
        // after the refresh, which the test checks it waited for.
        try await withDeployment(hooks: HookTests.sampleApp(onFailure: .allow, timeout: 10)) { deployment in
            @Sendable func body(mode: String) async throws -> String { try await Self.idTokenBody(deployment, hint: Self.olive, mode: mode) }
            @Sendable func tokenCalls() async throws -> Int { try await deployment.emulatorStats()["POST /oidc/token"] ?? 0 }
            var browser = Browser(deployment)
            #expect(try await Self.signIn(&browser, login: Self.olive, provider: "oidc.emulator").status == 200)
            let live = "\(deployment.gatewayURL)/v1/me/providers/oidc.emulator/profile"

            // Linking by ID token the identity already linked.
            let linkedGrant = try await Self.sealedTokens(deployment)
            let linked = try await Self.idTokenSignIn(&browser, try await body(mode: "link"))
            #expect(linked.status == 200, "\(linked.bodyText)")
            #expect(try await Self.sealedTokens(deployment) == linkedGrant, "the link kept its grant")
            #expect(try await browser.send(live).status == 200)

            // A code flow's new grant; then an app's sign-in by ID token waits for its hook
            // (held, at most 9.5 s) while the access token expires and the live profile
            // refreshes that grant.
            var again = Browser(deployment)
            #expect(try await Self.signIn(&again, login: Self.olive, provider: "oidc.emulator").status == 200)
            let granted = try await Self.sealedTokens(deployment)
            let lastSignIn = try await Self.lastSignIn(deployment)
            let calls = try await tokenCalls()
            let signIn = try await body(mode: "signin")
            let held = try await deployment.holdingHook("POST /sample-app/hooks/before-sign-in", milliseconds: 9500) {
                var app = Browser(deployment)
                return try await Self.idTokenSignIn(&app, signIn)
            }
            defer { held.cancel() }
            deployment.clock.advance(by: 3600)
            #expect(try await browser.send(live).status == 200)
            #expect(try await tokenCalls() == calls + 1, "the grant was refreshed")
            let refreshed = try await Self.sealedTokens(deployment)
            #expect(refreshed != granted)
            try #require(try await Self.lastSignIn(deployment) == lastSignIn, "the sign-in still waits at its hook")
            _ = try await deployment.control("faults/release", "{}")
            let answered = try await held.value
            #expect(answered.status == 200, "\(answered.bodyText)")
            #expect(try await Self.sealedTokens(deployment) == refreshed, "the refreshed grant was kept")
            // Past the profile cache, the kept access token serves the live profile unrefreshed.
            deployment.clock.advance(by: 61)
            #expect(try await browser.send(live).status == 200)
            #expect(try await tokenCalls() == calls + 1)
        }
    }

    @Test(
        "a pending credential claimed after its identity was linked anew leaves the link's newer grant: parked by an ID-token sign-in (no grant) or by a code flow (an older one)",
        arguments: ["idtoken", "code"])
    func claimedAfterALinkKeepsTheNewerGrant(parkedBy flow: String) async throws {
        try await withDeployment { deployment in
            var owner = Browser(deployment)
            #expect(try await owner.complete(login: "sam-shared").status == 200)
            var newcomer = Browser(deployment)
            let refused =
                flow == "idtoken"
                ? try await Self.idTokenSignIn(&newcomer, try await Self.idTokenBody(deployment, hint: "sam@oidc.example", mode: "signin"))
                : try await newcomer.complete(login: "sam@oidc.example", provider: "oidc.emulator")
            #expect(refused.status == 409, "\(refused.bodyText)")
            let pendingToken = try #require(try jsonObject(refused)["pendingToken"] as? String)
            deployment.clock.advance(by: 1)
            let linked = try await owner.complete(login: "sam@oidc.example", provider: "oidc.emulator", mode: "link")
            #expect(linked.status == 200, "\(linked.bodyText)")
            let granted = try await Self.sealedTokens(deployment)
            #expect(try await owner.complete(login: "sam-shared").status == 200, "a sign-in after the credential was parked")
            let claimed = try await owner.json("/v1/auth/link", #"{"pendingToken":"\#(pendingToken)"}"#)
            #expect(claimed.status == 200, "\(claimed.bodyText)")
            #expect(try await Self.sealedTokens(deployment) == granted, "the link kept its grant")
            deployment.clock.advance(by: 61)
            #expect(try await owner.send("\(deployment.gatewayURL)/v1/me/providers/oidc.emulator/profile").status == 200)
        }
    }

    /// A `POST /v1/auth/idtoken` body for the emulator's user `hint`, with a fresh nonce.
    static func idTokenBody(_ deployment: TestDeployment, hint: String, mode: String) async throws -> String {
        let nonce = SecureRandom.token()
        let idToken = try await mint(deployment, issuer: "oidc", hint: hint, extra: #", "nonce": "\#(SecureRandom.digest(nonce))""#)
        return #"{"providerId": "oidc.emulator", "idToken": "\#(idToken)", "rawNonce": "\#(nonce)", "mode": "\#(mode)"}"#
    }

    /// When the (one) account of the `oidc.emulator` link last signed in, as stored.
    static func lastSignIn(_ deployment: TestDeployment) async throws -> String? {
        try await openSQLite(deployment.databasePath).read { db in
            try String.fetchOne(
                db, sql: "SELECT a.last_sign_in_at FROM accounts a JOIN provider_links l ON l.uid = a.uid WHERE l.provider_id = 'oidc.emulator'")
        }
    }

    /// The sealed provider tokens of the (one) `oidc.emulator` link, as stored.
    static func sealedTokens(_ deployment: TestDeployment) async throws -> String? {
        try await openSQLite(deployment.databasePath).read { db in
            try String.fetchOne(db, sql: "SELECT sealed_tokens FROM provider_links WHERE provider_id = 'oidc.emulator'")
        }
    }

    /// No access, refresh or ID token and no client secret in the captured logs.
    static func expectNoSecretsLogged(_ deployment: TestDeployment) async throws {
        let logs = deployment.logs.lines.joined(separator: "\n")
        for token in await deployment.emulator.issuedAccessTokens() {
            #expect(!logs.contains(token))
        }
        for secret in [EmulatorConfigurationClients.oidc.secret, EmulatorConfigurationClients.yahoo.secret] {
            #expect(!logs.contains(secret))
        }
        // No JWT of any kind: a JSON header and payload, each base64url beginning `eyJ` (`{"`).
        // Not "eyJ" alone, which a random id in a log line (a uid, a key id) may hold by chance.
        #expect(logs.range(of: #"eyJ[A-Za-z0-9_-]*\.eyJ"#, options: .regularExpression) == nil)
    }
}

/// The emulator's demo clients for the OpenID Providers.
enum EmulatorConfigurationClients {
    static let oidc = EmulatorConfiguration.demoOIDCClient
    static let yahoo = EmulatorConfiguration.demoYahooClient
}
