import CurlClient
import Foundation
import GRDB
import GatehouseCore
import GatehousePostgres
import GatehouseTestSupport
import ProviderEmulator
import Testing

/// The app's blocking hooks and custom claims, end to end: the emulator's sample app
/// backend (`/sample-app/hooks/…`) receives the real signed calls over libcurl; faults on
/// its endpoints stand for an app that answers otherwise, slowly, or not at all.
@Suite("Hooks and custom claims")
struct HookTests {
    /// Both hooks at the sample app, signed with its secret. The timeout is the product's
    /// longest: the in-process emulator answers every call in time only when the machine is not
    /// loaded, and a test of timeouts sets its own.
    static func sampleApp(onFailure: HookFailurePolicy = .deny, timeout: TimeInterval = 10) -> @Sendable (String) -> HookConfiguration {
        { emulatorURL in
            HookConfiguration(
                urls: [
                    .beforeCreate: "\(emulatorURL)/sample-app/hooks/before-create",
                    .beforeSignIn: "\(emulatorURL)/sample-app/hooks/before-sign-in",
                ],
                secrets: [EmulatorConfiguration.demoHookSecret], timeout: timeout, onFailure: onFailure)
        }
    }

    /// Every row of the tables a sign-in writes (accounts, links with their sealed tokens,
    /// sessions, refresh tokens, pending credentials), as text: equal snapshots mean nothing
    /// was written.
    static func snapshot(_ deployment: TestDeployment) async throws -> [String: [String]] {
        try await openSQLite(deployment.databasePath).read { db in
            var tables: [String: [String]] = [:]
            for table in ["accounts", "provider_links", "sessions", "refresh_tokens", "pending_credentials"] {
                tables[table] = try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY rowid").map(\.description)
            }
            return tables
        }
    }

    /// The claims of a JWT.
    static func claims(_ token: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Base64URL.decode(String(token.split(separator: ".")[1])) ?? Data()) as? [String: Any])
    }

    /// The calls the sample app received.
    static func calls(_ deployment: TestDeployment) async throws -> [[String: Any]] {
        let response = try await deployment.client.execute(OutboundRequest(url: "\(deployment.emulatorURL)/_emulator/sample-app/calls"))
        return try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [[String: Any]])
    }

    /// A sign-in of `login` started in a task of its own whose `before-sign-in` call the hook
    /// holds (answering `answer` when the test posts `faults/release`, at most 9 s later):
    /// returned once the hook has the call, so the test acts while the sign-in waits.
    static func signInHeldAtHook(
        _ deployment: TestDeployment, login: String, provider: String = "github.com", answer: String
    ) async throws -> Task<OutboundResponse, any Error> {
        try await deployment.holdingHook("POST /sample-app/hooks/before-sign-in", milliseconds: 9000, answer: answer) {
            var browser = Browser(deployment)
            return try await browser.complete(login: login, provider: provider)
        }
    }

    /// The sample app answers `body` (status 200) to the next call of `event`.
    static func answer(_ deployment: TestDeployment, _ event: String, _ body: String, status: Int = 200, times: Int = 1) async throws {
        let fault: [String: Any] = ["endpoint": "POST /sample-app/hooks/\(event)", "status": status, "body": body, "times": times]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: fault), as: UTF8.self)
        #expect(try await deployment.control("faults", json).status == 201)
    }

    @Test("a before-create denial answers 403 sign-in-denied with the hook's message, and the store holds no account, link, token or session")
    func beforeCreateDenial() async throws {
        try await withDeployment(hooks: Self.sampleApp()) { deployment in
            let before = try await Self.snapshot(deployment)
            var browser = Browser(deployment)
            let denied = try await browser.complete(login: "blocked-bo")
            #expect(denied.status == 403, "\(denied.bodyText)")
            let problem = try jsonObject(denied)
            #expect(problem["code"] as? String == "sign-in-denied")
            #expect(problem["message"] as? String == "Accounts at blocked.example are not accepted by this app.")
            #expect(try await Self.snapshot(deployment) == before)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me").status == 401)
            // The hook was asked once, before-create; before-sign-in never (the denial ended it).
            let holds = try await Self.calls(deployment).map { $0["event"] as? String } == ["before-create"]
            #expect(holds)

            // The same through POST /v1/auth/idtoken: the answer itself is the problem.
            let minted = try jsonObject(
                try await deployment.control("oidc/id-token", #"{"issuer":"oidc","hint":"sam@oidc.example"}"#))
            try await Self.answer(deployment, "before-create", #"{"decision":"deny","message":"No\u0007 new\naccounts\u0000 today."}"#)
            let idToken = try #require(minted["idToken"] as? String)
            let exchanged = try await browser.json("/v1/auth/idtoken", #"{"providerId":"oidc.emulator","idToken":"\#(idToken)"}"#)
            #expect(exchanged.status == 403)
            // Control characters are removed from the message; a line break reads as a space.
            #expect(try jsonObject(exchanged)["message"] as? String == "No new accounts today.")
            #expect(try await Self.snapshot(deployment) == before)

            // Nothing was stored, so the ID token is not spent: a hook that cannot be asked, then
            // one that allows, and the app's same token signs in; once, as always.
            try await Self.answer(deployment, "before-create", #"{"decision":"allow"}"#, status: 503)
            let unavailable = try await browser.json("/v1/auth/idtoken", #"{"providerId":"oidc.emulator","idToken":"\#(idToken)"}"#)
            try #expect(unavailable.status == 503 && (try jsonObject(unavailable)["code"] as? String) == "hook-unavailable")
            let signedIn = try await browser.json("/v1/auth/idtoken", #"{"providerId":"oidc.emulator","idToken":"\#(idToken)"}"#)
            #expect(signedIn.status == 200, "\(signedIn.bodyText)")
            var stranger = Browser(deployment)
            let replayed = try await stranger.json("/v1/auth/idtoken", #"{"providerId":"oidc.emulator","idToken":"\#(idToken)"}"#)
            try #expect(replayed.status == 400 && (try jsonObject(replayed)["code"] as? String) == "invalid-idp-response", "\(replayed.bodyText)")
        }
    }

    @Test("a before-sign-in denial of an existing account changes nothing in the store; a denied link leaves the links as they were")
    func beforeSignInDenialChangesNothing() async throws {
        try await withDeployment(hooks: Self.sampleApp()) { deployment in
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "private-pat").status == 200)
            let signedIn = try await Self.snapshot(deployment)
            deployment.clock.advance(by: 30)

            try await Self.answer(deployment, "before-sign-in", #"{"decision":"deny","message":"Your account is suspended."}"#)
            var other = Browser(deployment)
            let denied = try await other.complete(login: "private-pat")
            #expect(denied.status == 403)
            #expect(try jsonObject(denied)["message"] as? String == "Your account is suspended.")
            #expect(try await Self.snapshot(deployment) == signedIn, "no session, no last sign-in, no new tokens or profile")

            try await Self.answer(deployment, "before-sign-in", #"{"decision":"deny","message":"Linking is closed."}"#)
            let link = try await browser.complete(login: "AdeleV@contoso.example", provider: "microsoft.com", mode: "link")
            #expect(link.status == 403)
            #expect(try jsonObject(link)["code"] as? String == "sign-in-denied")
            #expect(try await Self.snapshot(deployment) == signedIn, "the links are as they were")
            let me = try jsonObject(try await browser.send("\(deployment.gatewayURL)/v1/me"))
            #expect((me["providers"] as? [[String: Any]])?.count == 1)
        }
    }

    @Test(
        "claims from the hook and from PUT /v1/users/{uid}/claims appear in the ID token, follow a refresh and change on the next mint; session claims stay with their sign-in"
    )
    func claimsInTokens() async throws {
        try await withDeployment(hooks: Self.sampleApp()) { deployment in
            // The sample app makes octocat an admin.
            let (_, idToken, refreshToken) = try await GatewayTokenTests.signedIn(deployment)
            #expect(try Self.claims(idToken)["role"] as? String == "admin")
            let uid = try #require(try Self.claims(idToken)["sub"] as? String)
            let key = try await ProviderAPITests.key(deployment, ["users:claims", "profile:read"])

            func put(_ body: String) async throws -> OutboundResponse {
                try await ProviderAPITests.call(
                    deployment, "/v1/users/\(uid)/claims", key: key, method: "PUT", headers: ["Content-Type": "application/json"],
                    body: Array(body.utf8))
            }
            let stored = try await put(#"{"plan":"pro","teams":["red",{"lead":true}]}"#)
            #expect(stored.status == 200, "\(stored.bodyText)")
            #expect((try jsonObject(stored)["customClaims"] as? [String: Any])?["plan"] as? String == "pro")
            let user = try jsonObject(try await ProviderAPITests.call(deployment, "/v1/users/\(uid)", key: key))
            #expect((user["customClaims"] as? [String: Any])?["plan"] as? String == "pro")

            // A refresh mints with the account's claims as they are now: replaced whole.
            let refreshed = try jsonObject(try await GatewayTokenTests.refresh(deployment, refreshToken))
            let after = try Self.claims(try #require(refreshed["idToken"] as? String))
            #expect(after["plan"] as? String == "pro")
            #expect(after["role"] == nil)
            #expect(((after["teams"] as? [Any])?.last as? [String: Any])?["lead"] as? Bool == true)

            // A hook's customClaims and sessionClaims: the account's are stored, the session's
            // travel with this sign-in's tokens and their refreshes only.
            try await Self.answer(
                deployment, "before-sign-in", #"{"decision":"allow","customClaims":{"plan":"team"},"sessionClaims":{"mfa":"passkey"}}"#)
            var browser = Browser(deployment)
            let signIn = try jsonObject(try await browser.complete(login: "octocat"))
            let hooked = try Self.claims(try #require(signIn["idToken"] as? String))
            #expect(hooked["plan"] as? String == "team")
            #expect(hooked["mfa"] as? String == "passkey")
            let next = try jsonObject(try await GatewayTokenTests.refresh(deployment, try #require(signIn["refreshToken"] as? String)))
            #expect(try Self.claims(try #require(next["idToken"] as? String))["mfa"] as? String == "passkey")
            let first = try jsonObject(try await GatewayTokenTests.refresh(deployment, try #require(refreshed["refreshToken"] as? String)))
            let firstClaims = try Self.claims(try #require(first["idToken"] as? String))
            #expect(firstClaims["plan"] as? String == "team")
            #expect(firstClaims["mfa"] == nil, "another sign-in's session claims")

            // {} clears.
            #expect(try await put("{}").status == 200)
            let cleared = try jsonObject(try await GatewayTokenTests.refresh(deployment, try #require(first["refreshToken"] as? String)))
            #expect(try Self.claims(try #require(cleared["idToken"] as? String))["plan"] == nil)
            // The change is an audit event.
            let holds = deployment.logs.lines.contains { $0.contains("account.claims-updated") }
            #expect(holds)
        }
    }

    @Test(
        "the account's claims win over a sign-in's session claims on a shared name, so a change reaches every session; a hook answer whose claims together pass 1,000 bytes cannot be used"
    )
    func accountClaimsWinOverSessionClaims() async throws {
        try await withDeployment(hooks: Self.sampleApp()) { deployment in
            try await Self.answer(
                deployment, "before-create", #"{"decision":"allow","customClaims":{"role":"admin"},"sessionClaims":{"role":"owner","mfa":"otp"}}"#)
            let (_, idToken, refreshToken) = try await GatewayTokenTests.signedIn(deployment)
            let first = try Self.claims(idToken)
            #expect(first["role"] as? String == "admin" && first["mfa"] as? String == "otp", "\(first)")
            let uid = try #require(first["sub"] as? String)
            // A service demotes the user: the session's own claim does not keep the old role.
            let key = try await ProviderAPITests.key(deployment, ["users:claims"])
            let demoted = try await ProviderAPITests.call(
                deployment, "/v1/users/\(uid)/claims", key: key, method: "PUT", headers: ["Content-Type": "application/json"],
                body: Array(#"{"role":"viewer"}"#.utf8))
            #expect(demoted.status == 200)
            let refreshed = try jsonObject(try await GatewayTokenTests.refresh(deployment, refreshToken))
            let after = try Self.claims(try #require(refreshed["idToken"] as? String))
            #expect(after["role"] as? String == "viewer" && after["mfa"] as? String == "otp", "\(after)")

            // 600 bytes of account claims and 500 of session claims fit apart, not together.
            let large =
                #"{"decision":"allow","customClaims":{"a":"\#(String(repeating: "x", count: 590))"},"sessionClaims":{"b":"\#(String(repeating: "y", count: 490))"}}"#
            try await Self.answer(deployment, "before-sign-in", large)
            var browser = Browser(deployment)
            let refused = try await browser.complete(login: "octocat")
            #expect(refused.status == 503, "\(refused.bodyText)")
            #expect(try jsonObject(refused)["code"] as? String == "hook-unavailable")
            let stored = try jsonObject(
                try await ProviderAPITests.call(deployment, "/v1/users/\(uid)", key: try await ProviderAPITests.key(deployment, ["profile:read"])))
            #expect((stored["customClaims"] as? [String: Any])?["role"] as? String == "viewer", "nothing stored")

            // The session's own claims (a restriction, perhaps) are never dropped to make room:
            // a service's claims that would not fit beside them are refused...
            let crowding = #"{"blob":"\#(String(repeating: "z", count: 975))"}"#
            let put = try await ProviderAPITests.call(
                deployment, "/v1/users/\(uid)/claims", key: key, method: "PUT", headers: ["Content-Type": "application/json"],
                body: Array(crowding.utf8))
            #expect(put.status == 400 && put.bodyText.contains("invalid-argument"), "\(put.status) \(put.bodyText)")
            // ...and a session whose claims no longer fit beside the account's (a hook gave it
            // larger ones at another sign-in) mints no more: its user signs in again.
            try await Self.answer(deployment, "before-sign-in", #"{"decision":"allow","customClaims":\#(crowding)}"#)
            var other = Browser(deployment)
            #expect(try await other.complete(login: "octocat").status == 200)
            let crowded = try await GatewayTokenTests.refresh(deployment, try #require(refreshed["refreshToken"] as? String))
            #expect(crowded.status == 400 && crowded.bodyText.contains("invalid-refresh-token"), "\(crowded.status) \(crowded.bodyText)")
        }
        // A new account asks both hooks: answers that fit one by one but not together (400 bytes
        // of account claims, 450 of session claims from each) cannot be used either.
        try await withDeployment(hooks: Self.sampleApp()) { deployment in
            let before = try await Self.snapshot(deployment)
            let x = String(repeating: "x", count: 440)
            try await Self.answer(
                deployment, "before-create", #"{"decision":"allow","customClaims":{"c":"\#(x.prefix(390))"},"sessionClaims":{"a":"\#(x)"}}"#)
            try await Self.answer(deployment, "before-sign-in", #"{"decision":"allow","sessionClaims":{"b":"\#(x)"}}"#)
            var browser = Browser(deployment)
            let refused = try await browser.complete(login: "octocat")
            #expect(refused.status == 503, "\(refused.bodyText)")
            #expect(try jsonObject(refused)["code"] as? String == "hook-unavailable")
            #expect(try await Self.snapshot(deployment) == before, "nothing stored")
            let counted = try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/metrics")).bodyText
            #expect(counted.contains(#"gatehouse_hook_calls_total{hook="before-sign-in",outcome="invalid-answer"} 1"#), "\(counted)")
        }
    }

    @Test(
        "a claims change made while the hook is asked is not undone by its answer: the sign-in asks the hook again, with the claims as they are now"
    )
    func claimsChangedDuringTheHookAreKept() async throws {
        try await withDeployment(hooks: Self.sampleApp(timeout: 10)) { deployment in
            let (_, idToken, _) = try await GatewayTokenTests.signedIn(deployment)
            let uid = try #require(try Self.claims(idToken)["sub"] as? String)
            let key = try await ProviderAPITests.key(deployment, ["users:claims", "profile:read"])
            let endpoint = "POST /sample-app/hooks/before-sign-in"
            let asked = try await deployment.emulatorStats()[endpoint] ?? 0
            // The hook answers from the claims it was sent, when the test releases it; once it
            // has the call, a service changes the claims.
            let signIn = try await Self.signInHeldAtHook(
                deployment, login: "octocat", answer: #"{"decision":"allow","customClaims":{"role":"admin","plan":"from-hook"}}"#)
            let changed = try await ProviderAPITests.call(
                deployment, "/v1/users/\(uid)/claims", key: key, method: "PUT", headers: ["Content-Type": "application/json"],
                body: Array(#"{"role":"admin","suspended":true}"#.utf8))
            #expect(changed.status == 200)
            // Then the hook answers (held until now, at most 9 s).
            _ = try await deployment.control("faults/release", "{}")
            let answered = try await signIn.value
            #expect(answered.status == 200, "\(answered.bodyText)")
            // The stale answer was not stored: the hook was asked again, with the service's change,
            // and its answer to that (the sample app's: role admin) is what the account holds.
            #expect(try await deployment.emulatorStats()[endpoint] == asked + 2)
            let foundLast = try await Self.calls(deployment).last { $0["event"] as? String == "before-sign-in" }
            let last = try #require(foundLast)
            #expect((last["body"] as? String)?.contains(#""suspended":true"#) == true, "\(last)")
            let stored = try jsonObject(try await ProviderAPITests.call(deployment, "/v1/users/\(uid)", key: key))["customClaims"] as? [String: Any]
            #expect(stored?["role"] as? String == "admin" && stored?["plan"] == nil && stored?.count == 1, "\(String(describing: stored))")
        }
    }

    @Test("a claims change reaches the next mint on every instance (PostgreSQL, two instances with account caches)")
    func claimsAcrossInstances() async throws {
        let database = try await PostgresTestServer.freshDatabase()
        let store = try PostgresTestServer.store(database)
        defer { store.shutdown() }
        try await store.migrate()
        let (_, secret) = try await ServiceKeyService(storage: store).create(name: "roles", scopes: ["users:claims"])
        try await withDeployment(gateway: { $0.accountCacheLifetime = 600 }, hooks: Self.sampleApp(), database: database, instances: 2) {
            deployment in
            let (_, idToken, refreshToken) = try await GatewayTokenTests.signedIn(deployment)
            #expect(try Self.claims(idToken)["role"] as? String == "admin")
            let uid = try #require(try Self.claims(idToken)["sub"] as? String)
            // The second instance reads (and caches) the account with its claims.
            let second = deployment.gatewayURLs[1]
            var answer = try jsonObject(try await GatewayTokenTests.refresh(deployment, refreshToken, on: second))
            #expect(try Self.claims(try #require(answer["idToken"] as? String))["role"] as? String == "admin")

            let put = try await deployment.client.execute(
                OutboundRequest(
                    method: "PUT", url: "\(deployment.gatewayURL)/v1/users/\(uid)/claims",
                    headers: ["Authorization": "Bearer \(secret)", "Content-Type": "application/json"], body: Array(#"{"role":"viewer"}"#.utf8)))
            #expect(put.status == 200)
            // The change feed tells the second instance (its account cache keeps the claims
            // for ten minutes otherwise).
            let changed = ContinuousClock.now
            var role: String?
            repeat {
                answer = try jsonObject(
                    try await GatewayTokenTests.refresh(deployment, try #require(answer["refreshToken"] as? String), on: second))
                role = try Self.claims(try #require(answer["idToken"] as? String))["role"] as? String
                if role != "viewer" { try await Task.sleep(for: .milliseconds(50)) }
            } while role != "viewer" && ContinuousClock.now - changed < MultiInstanceTests.feedBound
            #expect(role == "viewer")
        }
    }

    @Test("every reserved claim name, a gatehouse… name, more than 1,000 bytes and nesting deeper than 8 are refused with 400 naming the claim")
    func reservedClaims() async throws {
        try await withDeployment { deployment in
            let (_, idToken, refreshToken) = try await GatewayTokenTests.signedIn(deployment)
            let uid = try #require(try Self.claims(idToken)["sub"] as? String)
            let key = try await ProviderAPITests.key(deployment, ["users:claims"])
            func put(_ body: String) async throws -> OutboundResponse {
                try await ProviderAPITests.call(
                    deployment, "/v1/users/\(uid)/claims", key: key, method: "PUT", headers: ["Content-Type": "application/json"],
                    body: Array(body.utf8))
            }
            let reserved = [
                "iss", "sub", "aud", "exp", "iat", "nbf", "jti", "auth_time", "nonce", "acr", "amr", "azp", "at_hash", "c_hash", "sid", "cnf",
                "email", "email_verified", "name", "picture", "identities", "sign_in_provider", "gatehouse", "gatehouse_role", "GatehouseTier",
                // OpenID Connect's standard claims and RFC 8693's: a relying party may trust them.
                "given_name", "family_name", "middle_name", "nickname", "preferred_username", "profile", "website", "gender", "birthdate",
                "zoneinfo", "locale", "phone_number", "phone_number_verified", "address", "updated_at", "act", "may_act", "scope", "client_id",
                "Preferred_Username",
                // OpenID Connect's aggregated and distributed claims: a relying party fetches
                // claims from their sources and trusts them as the issuer's.
                "_claim_names", "_claim_sources", "_Claim_Sources",
                // A verified identity and a grant (OpenID Connect for Identity Assurance, RFC 9396).
                "verified_claims", "authorization_details",
                // A path getter reads these as the issuer's nested claims.
                "firebase.sign_in_provider", "address.country", "Sub.id", "firebase[sign_in_provider]",
            ]
            // Every claim the gateway mints is among them.
            #expect(Set(try Self.claims(idToken).keys).isSubset(of: Set(reserved)))
            for name in reserved {
                let refused = try await put(#"{"ok":1,"\#(name)":"x"}"#)
                #expect(refused.status == 400, "\(name)")
                let problem = try jsonObject(refused)
                #expect(problem["code"] as? String == "invalid-argument")
                #expect((problem["detail"] as? String)?.contains("\"\(name)\"") == true, "\(name): \(problem)")
            }
            #expect(try await put(#"{"blob":"\#(String(repeating: "x", count: 1000))"}"#).status == 400)
            let nine = String(repeating: "[", count: 9) + String(repeating: "]", count: 9)
            #expect(try await put(#"{"deep":\#(nine)}"#).status == 400)
            let eight = String(repeating: "[", count: 8) + String(repeating: "]", count: 8)
            #expect(try await put(#"{"deep":\#(eight)}"#).status == 200)
            // A path-shaped name under the app's own first part is the app's, and reaches the token.
            #expect(try await put(#"{"app.role":"editor","roles[0]":"x"}"#).status == 200)
            let refreshed = try await GatewayTokenTests.refresh(deployment, refreshToken)
            let minted = try Self.claims(try #require(try jsonObject(refreshed)["idToken"] as? String))
            #expect(minted["app.role"] as? String == "editor" && minted["roles[0]"] as? String == "x", "\(minted)")
            // An integer beyond ±(2^53 - 1) may come back changed (JSON numbers are doubles):
            // refused, anywhere in the value; 2^53 - 1 is kept exactly.
            for large in ["123456789012345678", "-9007199254740993", "9007199254740992", "1e300", "[1, {\"id\": 9007199254740993}]"] {
                let refused = try await put(#"{"discord_id":\#(large)}"#)
                #expect(refused.status == 400, "\(large)")
                #expect((try jsonObject(refused)["detail"] as? String)?.contains("2^53") == true, "\(large)")
            }
            let exact = try await put(#"{"discord_id":9007199254740991,"ratio":0.25}"#)
            #expect(exact.status == 200)
            #expect(exact.bodyText.contains("9007199254740991") && exact.bodyText.contains("0.25"), "\(exact.bodyText)")
            #expect(try await put("[1]").status == 400)
            #expect(try await put("not json").status == 400)
            // Without the scope: 403; an unknown account: 404.
            let narrow = try await ProviderAPITests.key(deployment, ["profile:read"])
            let forbidden = try await ProviderAPITests.call(
                deployment, "/v1/users/\(uid)/claims", key: narrow, method: "PUT", headers: ["Content-Type": "application/json"],
                body: Array("{}".utf8))
            #expect(forbidden.status == 403)
            let unknown = try await ProviderAPITests.call(
                deployment, "/v1/users/nobody/claims", key: key, method: "PUT", headers: ["Content-Type": "application/json"], body: Array("{}".utf8))
            #expect(unknown.status == 404)
        }
    }

    @Test(
        "the console's operator claim (GATEHOUSE_ADMIN_CLAIM) changes only by an admin key or an operator: a users:claims key and a hook answer that would grant or remove it are refused, and nothing is stored"
    )
    func operatorClaimIsProtected() async throws {
        try await withDeployment(
            gateway: { $0.console = ConsoleConfiguration(operators: ["nobody@example.com"], operatorClaim: "staff") }, hooks: Self.sampleApp()
        ) { deployment in
            let (_, idToken, _) = try await GatewayTokenTests.signedIn(deployment)
            let uid = try #require(try Self.claims(idToken)["sub"] as? String)
            let narrow = try await ProviderAPITests.key(deployment, ["users:claims", "profile:read"])
            let admin = try await ProviderAPITests.key(deployment, ["users:claims", "admin"])
            func put(_ body: String, key: String) async throws -> OutboundResponse {
                try await ProviderAPITests.call(
                    deployment, "/v1/users/\(uid)/claims", key: key, method: "PUT", headers: ["Content-Type": "application/json"],
                    body: Array(body.utf8))
            }
            func stored() async throws -> [String: Any] {
                try jsonObject(try await ProviderAPITests.call(deployment, "/v1/users/\(uid)", key: narrow))["customClaims"] as? [String: Any] ?? [:]
            }
            // A key that may set claims but is not an admin cannot make the account an operator.
            let granted = try await put(#"{"plan":"pro","staff":true}"#, key: narrow)
            #expect(granted.status == 403, "\(granted.bodyText)")
            #expect(try jsonObject(granted)["code"] as? String == "permission-denied")
            #expect((try jsonObject(granted)["detail"] as? String)?.contains("GATEHOUSE_ADMIN_CLAIM") == true)
            #expect(try await stored()["plan"] == nil, "nothing stored")
            #expect(try await put(#"{"plan":"pro","staff":false}"#, key: narrow).status == 403)
            // Nor under a name a consumer comparing without case reads as it (Go's encoding/json).
            for lookalike in [#"{"STAFF":true}"#, #"{"Staff":true,"plan":"pro"}"#] {
                #expect(try await put(lookalike, key: narrow).status == 403, "\(lookalike)")
            }
            // Claims that leave it as it is pass.
            #expect(try await put(#"{"plan":"pro"}"#, key: narrow).status == 200)
            // An admin key grants it; then the narrow key keeps it or is refused removing it.
            #expect(try await put(#"{"plan":"pro","staff":true}"#, key: admin).status == 200)
            #expect(try await put(#"{"plan":"team","staff":true}"#, key: narrow).status == 200)
            #expect(try await put(#"{"plan":"solo"}"#, key: narrow).status == 403)
            let kept = try await stored()
            #expect(kept["staff"] as? Bool == true && kept["plan"] as? String == "team", "\(kept)")

            // A hook answer that changes it is an unusable answer: the failure policy (deny).
            for answer in [#"{"staff":false}"#, #"{"staff":"yes","plan":"team"}"#, #"{"STAFF":true,"staff":true}"#] {
                try await Self.answer(deployment, "before-sign-in", #"{"decision":"allow","customClaims":\#(answer)}"#)
                var browser = Browser(deployment)
                let refused = try await browser.complete(login: "octocat")
                #expect(refused.status == 503, "\(answer): \(refused.bodyText)")
                #expect(try jsonObject(refused)["code"] as? String == "hook-unavailable", "\(answer)")
            }
            let unchanged = try await stored()
            #expect(unchanged["staff"] as? Bool == true && unchanged["plan"] as? String == "team", "\(unchanged)")
            let holds = deployment.logs.lines.contains { $0.contains("operator claim") }
            #expect(holds, "the reason is logged")
            // One that keeps it goes through; one that leaves it out keeps it too (an app's hook
            // that answers fixed claims must not lock its operators out).
            try await Self.answer(deployment, "before-sign-in", #"{"decision":"allow","customClaims":{"staff":true,"plan":"hooked"}}"#)
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
            #expect(try await stored()["plan"] as? String == "hooked")
            try await Self.answer(deployment, "before-sign-in", #"{"decision":"allow","customClaims":{"plan":"fixed"}}"#)
            var again = Browser(deployment)
            #expect(try await again.complete(login: "octocat").status == 200)
            let carried = try await stored()
            #expect(carried["plan"] as? String == "fixed" && carried["staff"] as? Bool == true, "\(carried)")
            // So is a stored name that reads as it (an admin key may set one): a hook may not
            // remove it any more than a narrow key may.
            #expect(try await put(#"{"plan":"fixed","staff":true,"STAFF":"x"}"#, key: admin).status == 200)
            try await Self.answer(deployment, "before-sign-in", #"{"decision":"allow","customClaims":{"plan":"again"}}"#)
            var third = Browser(deployment)
            #expect(try await third.complete(login: "octocat").status == 200)
            let lookalikeKept = try await stored()
            #expect(lookalikeKept["STAFF"] as? String == "x" && lookalikeKept["staff"] as? Bool == true, "\(lookalikeKept)")
            #expect(lookalikeKept["plan"] as? String == "again")
            #expect(try await put(#"{"plan":"again","staff":true}"#, key: narrow).status == 403, "the narrow key may not remove it either")

            // sessionClaims may not name it at all: where the account has none, or loses it
            // later (a demotion that removes it), a session's tokens would still carry it.
            var pat = Browser(deployment)
            #expect(try await pat.complete(login: "private-pat").status == 200)
            for answer in [#"{"staff":true,"seat":"a1"}"#, #"{"staff":false}"#, #"{"Staff":true}"#] {
                try await Self.answer(deployment, "before-sign-in", #"{"decision":"allow","sessionClaims":\#(answer)}"#)
                var elevated = Browser(deployment)
                let refused = try await elevated.complete(login: "private-pat")
                #expect(refused.status == 503, "\(answer): \(refused.bodyText)")
                #expect(try jsonObject(refused)["code"] as? String == "hook-unavailable")
            }
            try await Self.answer(deployment, "before-sign-in", #"{"decision":"allow","sessionClaims":{"staff":true}}"#)
            var repeated = Browser(deployment)
            #expect(try await repeated.complete(login: "octocat").status == 503, "not even the value the account has")
        }
    }

    @Test(
        "an account disabled while its before-sign-in hook is asked gets nothing of the sign-in or a link: 403 user-disabled, the hook's claims and the new identity not stored, and enabling it brings no session back"
    )
    func disabledDuringTheHook() async throws {
        try await withDeployment(hooks: Self.sampleApp(timeout: 10)) { deployment in
            var first = Browser(deployment)
            let signedIn = try jsonObject(try await first.complete(login: "private-pat"))
            let uid = try #require((signedIn["user"] as? [String: Any])?["uid"] as? String)
            let key = try await ProviderAPITests.key(deployment, ["admin", "admin:users", "profile:read"])
            // The hook allows with claims, when the test releases it; once it has the call, an
            // operator disables the account.
            let signingIn = try await Self.signInHeldAtHook(
                deployment, login: "private-pat", answer: #"{"decision":"allow","customClaims":{"plan":"from-hook"}}"#)
            let disabled = try await AdminRoutesTests.call(deployment, "/v1/users/\(uid)/disable", key: key, method: "POST")
            #expect(disabled.status == 200 || disabled.status == 204, "\(disabled.bodyText)")
            _ = try await deployment.control("faults/release", "{}")
            let late = try await signingIn.value
            #expect(late.status == 403, "\(late.bodyText)")
            #expect(try jsonObject(late)["code"] as? String == "user-disabled")
            let enabled = try await AdminRoutesTests.call(deployment, "/v1/users/\(uid)/enable", key: key, method: "POST")
            #expect(enabled.status == 200 || enabled.status == 204)
            let sessions = try jsonObject(try await AdminRoutesTests.call(deployment, "/v1/admin/users/\(uid)/sessions", key: key))["sessions"]
            #expect((sessions as? [Any])?.count == 0, "no session from before the disable, none from during it: \(String(describing: sessions))")
            let afterSignIn = try jsonObject(try await ProviderAPITests.call(deployment, "/v1/users/\(uid)", key: key))
            #expect((afterSignIn["customClaims"] as? [String: Any])?["plan"] == nil, "the hook's claims were stored: \(afterSignIn)")

            // A link the account's session asks for, disabled the same way while its hook waits.
            var owner = Browser(deployment)
            #expect(try await owner.complete(login: "private-pat").status == 200)
            let linking = owner
            let link = try await deployment.holdingHook("POST /sample-app/hooks/before-sign-in", milliseconds: 9000) {
                var browser = linking
                return try await browser.complete(login: "olive@oidc.example", provider: "oidc.emulator", mode: "link")
            }
            let disabledAgain = try await AdminRoutesTests.call(deployment, "/v1/users/\(uid)/disable", key: key, method: "POST")
            #expect(disabledAgain.status == 200 || disabledAgain.status == 204, "\(disabledAgain.bodyText)")
            _ = try await deployment.control("faults/release", "{}")
            let linked = try await link.value
            #expect(linked.status == 403, "\(linked.bodyText)")
            #expect(try jsonObject(linked)["code"] as? String == "user-disabled")
            #expect(try account(try await ProviderAPITests.call(deployment, "/v1/users/\(uid)", key: key)) == (uid, ["github.com"]))
        }
    }

    @Test(
        "an identity unlinked while its sign-in's hook is asked signs in to nothing of the account it left: the sign-in is decided again, as a new account"
    )
    func unlinkedDuringTheHook() async throws {
        try await withDeployment(hooks: Self.sampleApp(timeout: 10)) { deployment in
            var browser = Browser(deployment)
            let uid = try account(try await browser.complete(login: "octocat")).uid
            let linked = try await browser.complete(login: "olive@oidc.example", provider: "oidc.emulator", mode: "link")
            #expect(try account(linked) == (uid, ["github.com", "oidc.emulator"]))
            let key = try await ProviderAPITests.key(deployment, ["admin", "admin:users", "profile:read"])
            // Olive signs in; once the hook has the call, an operator unlinks her identity.
            let signingIn = try await Self.signInHeldAtHook(
                deployment, login: "olive@oidc.example", provider: "oidc.emulator", answer: #"{"decision":"allow"}"#)
            let unlinked = try await AdminRoutesTests.call(deployment, "/v1/admin/users/\(uid)/providers/oidc.emulator", key: key, method: "DELETE")
            #expect(unlinked.status == 200 || unlinked.status == 204, "\(unlinked.bodyText)")
            _ = try await deployment.control("faults/release", "{}")
            let late = try await signingIn.value
            #expect(late.status == 200, "\(late.bodyText)")
            let signedIn = try account(late)
            #expect(signedIn.uid != uid && signedIn.providers == ["oidc.emulator"], "\(late.bodyText)")
            #expect(try jsonObject(late)["isNewUser"] as? Bool == true)
            // The account she left has no session of hers and keeps its one identity.
            let sessions = try jsonObject(try await AdminRoutesTests.call(deployment, "/v1/admin/users/\(uid)/sessions", key: key))["sessions"]
            let providers = (sessions as? [[String: Any]])?.map { $0["signInProvider"] as? String }
            #expect(providers == ["github.com"], "\(String(describing: sessions))")
            #expect(try account(try await ProviderAPITests.call(deployment, "/v1/users/\(uid)", key: key)) == (uid, ["github.com"]))
        }
    }

    @Test("a hook that times out, answers garbage, more than 16 KB or a 5xx, or refuses the connection denies with 503 hook-unavailable by default")
    func failuresDenyByDefault() async throws {
        // 10 s: under a full test run on two cores, an answer of 20 KB from the in-process
        // emulator took longer than 0.5 s and counted as a timeout instead of too-large.
        try await withDeployment(hooks: Self.sampleApp(timeout: 10)) { deployment in
            let before = try await Self.snapshot(deployment)
            let faults: [(String, [String: Any])] = [
                ("timeout", ["delayMs": 12000, "status": 200, "body": #"{"decision":"allow"}"#]),
                ("garbage", ["status": 200, "body": "<html>oops</html>"]),
                ("unknown member", ["status": 200, "body": #"{"decision":"allow","role":"admin"}"#]),
                ("reserved claim", ["status": 200, "body": #"{"decision":"allow","customClaims":{"sub":"someone-else"}}"#]),
                ("too large", ["status": 200, "bodyBytes": 20000]),
                ("5xx", ["status": 503, "body": #"{"decision":"allow"}"#]),
            ]
            let started = ContinuousClock.now
            for (name, fault) in faults {
                var fault = fault
                fault["endpoint"] = "POST /sample-app/hooks/before-create"
                fault["times"] = 1
                #expect(
                    try await deployment.control("faults", String(decoding: try JSONSerialization.data(withJSONObject: fault), as: UTF8.self)).status
                        == 201)
                var browser = Browser(deployment)
                let refused = try await browser.complete(login: "octocat")
                #expect(refused.status == 503, "\(name): \(refused.bodyText)")
                #expect(try jsonObject(refused)["code"] as? String == "hook-unavailable", "\(name)")
                #expect(try await Self.snapshot(deployment) == before, "\(name): nothing stored")
            }
            let counted = try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/metrics")).bodyText
            for outcome in ["timeout", "invalid-answer", "too-large", "bad-status"] {
                #expect(counted.contains(#"gatehouse_hook_calls_total{hook="before-create",outcome="\#(outcome)"}"#), "\(outcome)")
            }
            // One warning line for the burst, not one per sign-in (a second only if a loaded
            // machine stretched the burst past the minute between warnings).
            let minutes = Int((ContinuousClock.now - started) / .seconds(60))
            let warnings = deployment.logs.lines.filter { $0.contains("hook call failed") && $0.contains("\"warning\"") }.count
            #expect((1...1 + minutes).contains(warnings), "\(warnings) warnings in \(minutes) minutes")
        }
        // A refused connection: nothing listens on port 1. Five of them, met by two identities,
        // open the hook's breaker: the sixth sign-in is refused without a connection attempt.
        try await withDeployment(hooks: { _ in
            HookConfiguration(urls: [.beforeCreate: "http://127.0.0.1:1/hook"], secrets: [EmulatorConfiguration.demoHookSecret])
        }) { deployment async throws in
            for login in ["octocat", "private-pat", "octocat", "private-pat", "octocat", "private-pat"] {
                var browser = Browser(deployment)
                let refused = try await browser.complete(login: login)
                #expect(refused.status == 503)
                #expect(try jsonObject(refused)["code"] as? String == "hook-unavailable")
            }
            #expect(try await deployment.accountCount() == 0)
            let counted = try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/metrics")).bodyText
            #expect(counted.contains(#"gatehouse_hook_calls_total{hook="before-create",outcome="unreachable"} 5"#), "\(counted)")
            #expect(counted.contains(#"gatehouse_hook_calls_total{hook="before-create",outcome="circuit-open"} 1"#))
        }
    }

    @Test(
        "a receiver that is down for two identities five times in a row is not called for the breaker's open time: sign-ins get 503 with Retry-After at once, then one call probes it; one identity's failures alone, unusable answers and 500s never open it"
    )
    func breakerSparesADownReceiver() async throws {
        try await withDeployment(hooks: Self.sampleApp()) { deployment in
            let endpoint = "POST /sample-app/hooks/before-create"
            func signIn(_ login: String) async throws -> OutboundResponse {
                var browser = Browser(deployment)
                return try await browser.complete(login: login)
            }
            func expectRefused(_ response: OutboundResponse) throws {
                #expect(response.status == 503)
                #expect(try jsonObject(response)["code"] as? String == "hook-unavailable")
            }
            func calls() async throws -> Int { try await deployment.emulatorStats()[endpoint] ?? 0 }
            // One identity meeting a 5xx six times: its own data may be what the receiver fails
            // on, so the receiver is still asked every time.
            try await Self.answer(deployment, "before-create", "", status: 503, times: 6)
            for _ in 0..<6 { try expectRefused(try await signIn("octocat")) }
            #expect(try await calls() == 6)
            // Answers that are not answers (a 4xx, garbage, more than 16 KB): the receiver is up.
            try await Self.answer(deployment, "before-create", "", status: 404)
            try await Self.answer(deployment, "before-create", "garbage")
            #expect(
                try await deployment.control("faults", #"{"endpoint": "\#(endpoint)", "status": 200, "bodyBytes": 20000, "times": 1}"#).status == 201)
            for login in ["octocat", "private-pat", "octocat"] { try expectRefused(try await signIn(login)) }
            #expect(try await calls() == 9)
            // Nor does a 500, however many identities meet it: the receiver answered, failing on
            // the call (two accounts whose data it errs on must not open it for everyone).
            try await Self.answer(deployment, "before-create", "", status: 500, times: 6)
            for login in ["octocat", "private-pat", "octocat", "private-pat", "octocat", "private-pat"] {
                try expectRefused(try await signIn(login))
            }
            #expect(try await calls() == 15)
            // Five failures in a row that say it is down (503), met by two identities, open it.
            try await Self.answer(deployment, "before-create", "", status: 503, times: 5)
            for login in ["octocat", "private-pat", "octocat", "private-pat", "octocat"] { try expectRefused(try await signIn(login)) }
            #expect(try await calls() == 20)

            // Open: refused at once with the rest of the open time, the receiver not called.
            let refused = try await signIn("private-pat")
            try expectRefused(refused)
            // The rest of the 30 s (the clock runs on while the sign-in is made), not the 1 s of a failed call.
            let retryAfter = try #require(Int(refused.headers["retry-after"] ?? ""))
            #expect((2...30).contains(retryAfter))
            #expect(try await calls() == 20)
            let metrics = try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/metrics")).bodyText
            #expect(metrics.contains(#"gatehouse_hook_calls_total{hook="before-create",outcome="circuit-open"} 1"#))
            #expect(metrics.contains(#"gatehouse_circuit_state{provider="hook:before-create"} 2"#))
            #expect(
                !metrics.contains(#"gatehouse_hook_call_duration_seconds_count{hook="before-create",outcome="circuit-open"}"#), "no call, no duration"
            )

            // After the open time one call probes the receiver, which answers again.
            deployment.clock.advance(by: 30)
            #expect(try await signIn("octocat").status == 200)
            #expect(try await calls() == 21)
            #expect(try await deployment.accountCount() == 1)
        }
    }

    @Test(
        "a receiver that refuses with an error status and a deny answer, or says deny with spaces around it, denies under either failure policy: 403 sign-in-denied with its message, nothing stored"
    )
    func denialsWithAnErrorStatus() async throws {
        for policy in [HookFailurePolicy.allow, .deny] {
            try await withDeployment(hooks: Self.sampleApp(onFailure: policy)) { deployment in
                let before = try await Self.snapshot(deployment)
                let answers: [(status: Int, body: String, message: String)] = [
                    (403, #"{"decision":"deny","message":"Account banned"}"#, "Account banned"),
                    (400, #"{"decision":"DENY"}"#, "The sign-in was refused."),
                    (500, #"{"decision":"deny","message":"Not today"}"#, "Not today"),
                    (200, #"{"decision":" deny\n","message":"Spaced out"}"#, "Spaced out"),
                ]
                for answer in answers {
                    try await Self.answer(deployment, "before-create", answer.body, status: answer.status)
                    var browser = Browser(deployment)
                    let denied = try await browser.complete(login: "octocat")
                    #expect(denied.status == 403, "\(policy) \(answer.status): \(denied.bodyText)")
                    let problem = try jsonObject(denied)
                    #expect(problem["code"] as? String == "sign-in-denied", "\(policy) \(answer.status)")
                    #expect(problem["message"] as? String == answer.message, "\(policy) \(answer.status)")
                    #expect(try await Self.snapshot(deployment) == before, "\(policy) \(answer.status): nothing stored")
                }
                let counted = try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/metrics")).bodyText
                #expect(counted.contains(#"gatehouse_hook_calls_total{hook="before-create",outcome="deny"} 4"#), "\(counted)")
            }
        }
    }

    @Test("with GATEHOUSE_HOOK_ON_FAILURE=allow the same failures let the sign-in through without claims")
    func failuresAllowWhenConfigured() async throws {
        try await withDeployment(hooks: Self.sampleApp(onFailure: .allow, timeout: 0.5)) { deployment in
            try await Self.answer(deployment, "before-create", "", status: 500)
            try await Self.answer(deployment, "before-sign-in", "garbage")
            var first = Browser(deployment)
            #expect(try await first.complete(login: "private-pat").status == 200)
            let timeout: [String: Any] = ["endpoint": "POST /sample-app/hooks/before-sign-in", "delayMs": 1500, "times": 1]
            try await deployment.control("faults", String(decoding: try JSONSerialization.data(withJSONObject: timeout), as: UTF8.self))
            var second = Browser(deployment)
            let again = try await second.complete(login: "octocat")
            #expect(again.status == 200)
            // The admin claim the hook would have added is not there: the hook was not heard.
            #expect(try Self.claims(try #require(try jsonObject(again)["idToken"] as? String))["role"] == nil)
            #expect(try await deployment.accountCount() == 2)
        }
        try await withDeployment(hooks: { _ in
            HookConfiguration(urls: [.beforeCreate: "http://127.0.0.1:1/hook"], secrets: [EmulatorConfiguration.demoHookSecret], onFailure: .allow)
        }) { deployment async throws in
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
        }
    }

    @Test(
        "under GATEHOUSE_HOOK_ON_FAILURE=allow a receiver that refuses the gateway's signature (401) or its call (403) without a deny answer still refuses the sign-in: 503 hook-unavailable, nothing stored"
    )
    func refusedCallsDenyUnderAllow() async throws {
        // A rotated secret the receiver does not know: it answers every call 401. The longest
        // timeout: under `allow` a call that times out lets the sign-in through, and a loaded
        // machine can take more than the default 2 s to answer.
        let wrongSecret = "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()
        try await withDeployment(hooks: { emulatorURL in
            HookConfiguration(
                urls: [.beforeCreate: "\(emulatorURL)/sample-app/hooks/before-create"], secrets: [wrongSecret], timeout: 10,
                onFailure: .allow)
        }) { deployment in
            let before = try await Self.snapshot(deployment)
            var browser = Browser(deployment)
            let refused = try await browser.complete(login: "octocat")
            #expect(refused.status == 503, "\(refused.bodyText)")
            #expect(try jsonObject(refused)["code"] as? String == "hook-unavailable")
            #expect(try await Self.snapshot(deployment) == before)
        }
        try await withDeployment(hooks: Self.sampleApp(onFailure: .allow)) { deployment in
            let before = try await Self.snapshot(deployment)
            try await Self.answer(deployment, "before-create", #"{"error":"forbidden"}"#, status: 403)
            var browser = Browser(deployment)
            let refused = try await browser.complete(login: "octocat")
            #expect(refused.status == 503, "\(refused.bodyText)")
            #expect(try jsonObject(refused)["code"] as? String == "hook-unavailable")
            #expect(try await Self.snapshot(deployment) == before)
            // Other failures still go on under `allow`.
            try await Self.answer(deployment, "before-create", "", status: 500)
            #expect(try await browser.complete(login: "octocat").status == 200)
        }
    }

    @Test(
        "the hook request: signed (the PyPI standardwebhooks package verifies it), the account, the profile, ID token claims and context, never a provider token"
    )
    func hookRequestContents() async throws {
        let python = try #require(
            ProcessInfo.processInfo.environment["GATEHOUSE_TEST_PYJWT_PYTHON"],
            "set GATEHOUSE_TEST_PYJWT_PYTHON to a python with standardwebhooks (scripts/test does)")
        try await withDeployment(hooks: Self.sampleApp()) { deployment in
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
            #expect(try await browser.complete(login: "AdeleV@contoso.example", provider: "microsoft.com", mode: "link").status == 200)
            var other = Browser(deployment)
            #expect(try await other.complete(login: "sam@oidc.example", provider: "oidc.emulator").status == 200)
            let calls = try await Self.calls(deployment)
            let holds =
                calls.map { $0["event"] as? String } == ["before-create", "before-sign-in", "before-sign-in", "before-create", "before-sign-in"]
            #expect(holds)

            let bodies = calls.compactMap { $0["body"] as? String }
            for token in await deployment.emulator.issuedAccessTokens() {
                let holds2 = !bodies.contains { $0.contains(token) }
                #expect(holds2, "a provider access token reached the hook")
            }
            for body in bodies {
                #expect(!body.contains("refresh_token") && !body.contains("access_token") && !body.contains("\"idToken\""))
            }
            let create = try #require(try JSONSerialization.jsonObject(with: Data(bodies[0].utf8)) as? [String: Any])
            #expect(create["type"] as? String == "before-create")
            #expect((create["id"] as? String)?.hasPrefix("evt_") == true)
            let data = try #require(create["data"] as? [String: Any])
            let account = try #require(data["account"] as? [String: Any])
            #expect(account["uid"] is NSNull)
            #expect(account["isNew"] as? Bool == true)
            #expect(account["email"] as? String == "octocat@github.com")
            #expect((data["profile"] as? [String: Any])?["federatedId"] as? String == "583231")
            let context = try #require(data["context"] as? [String: Any])
            #expect(context["providerId"] as? String == "github.com")
            #expect(context["mode"] as? String == "signin")
            #expect(context["flow"] as? String == "redirect")
            #expect(context["clientAddress"] as? String == "127.0.0.1")
            #expect(context["returnToOrigin"] as? String == "https://app.example.com")
            #expect(context["platform"] as? String == "web")
            #expect(data["idTokenClaims"] == nil, "GitHub sends no ID token")

            let link = try #require(try JSONSerialization.jsonObject(with: Data(bodies[2].utf8)) as? [String: Any])
            let linkData = try #require(link["data"] as? [String: Any])
            #expect((linkData["context"] as? [String: Any])?["mode"] as? String == "link")
            #expect((linkData["account"] as? [String: Any])?["providers"] as? [String] == ["github.com"])
            #expect((linkData["account"] as? [String: Any])?["customClaims"] as? [String: String] == ["role": "admin"])
            #expect((linkData["idTokenClaims"] as? [String: Any])?["tid"] is String, "Microsoft's ID token claims")
            let oidc = try #require(try JSONSerialization.jsonObject(with: Data(bodies[3].utf8)) as? [String: Any])
            #expect(((oidc["data"] as? [String: Any])?["idTokenClaims"] as? [String: Any])?["sub"] is String)

            // An implementation that is not ours checks every signature.
            let script = """
                import json, sys
                from standardwebhooks.webhooks import Webhook
                secret, calls = sys.argv[1], json.load(open(sys.argv[2]))
                hook = Webhook(secret)
                for call in calls:
                    hook.verify(call["body"], call["headers"])
                tampered = dict(calls[0])
                try:
                    hook.verify(tampered["body"].replace("octocat", "octocaT"), tampered["headers"])
                    print("TAMPERED-ACCEPTED")
                except Exception:
                    print("verified", len(calls))
                """
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("hook-calls-\(UUID().uuidString).json")
            try JSONSerialization.data(withJSONObject: calls.map { ["body": $0["body"], "headers": $0["headers"]] }).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let run = try await GatewayTokenTests.output(python, ["-c", script, EmulatorConfiguration.demoHookSecret, file.path])
            #expect(run.status == 0, "\(run.output)")
            #expect(run.output.trimmingCharacters(in: .whitespacesAndNewlines) == "verified 5")
        }
    }
}
