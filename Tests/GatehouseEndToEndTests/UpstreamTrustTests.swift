import CurlClient
import Foundation
import GatehouseCore
import ProviderEmulator
import Testing

/// Issue #16: what a hostile or faulty upstream can do, and to whom.
@Suite("Upstream trust")
struct UpstreamTrustTests {
    /// A provider whose refresh the tests break: its id, a seeded user and how to sign in.
    struct RefreshingProvider: Sendable, CustomTestStringConvertible {
        let id: String
        let hint: String
        /// The emulator's token endpoint (`METHOD path`, as faults name it).
        let tokenEndpoint: String
        /// The HTTP status of the provider's OAuth errors (GitHub answers them with 200).
        var errorStatus = 400
        /// Its code for a client it does not know, and for a dead refresh token.
        var misconfigured = "invalid_client"
        var deadGrant = "invalid_grant"
        /// How long its access tokens live, in seconds.
        var tokenLifetime: Double = 3600
        /// Adjusts the gateway to a client of the emulator that gets refresh tokens.
        var gateway: @Sendable (inout GatewayConfiguration) -> Void = { _ in }
        var testDescription: String { id }
    }

    static let refreshing = [
        RefreshingProvider(id: "oidc.emulator", hint: "olive@oidc.example", tokenEndpoint: "POST /oidc/token"),
        RefreshingProvider(id: "yahoo.com", hint: "yuki@yahoo.example", tokenEndpoint: "POST /yahoo/oauth2/get_token"),
        RefreshingProvider(id: "microsoft.com", hint: "AdeleV@contoso.example", tokenEndpoint: "POST /microsoft/common/oauth2/v2.0/token"),
        // A GitHub App: expiring user tokens (8 h) with refresh tokens; errors come with HTTP 200.
        RefreshingProvider(
            id: "github.com", hint: "octocat", tokenEndpoint: "POST /github/login/oauth/access_token", errorStatus: 200,
            misconfigured: "incorrect_client_credentials", deadGrant: "bad_refresh_token", tokenLifetime: 28800,
            gateway: useGitHubApp),
    ]

    /// Points the gateway's GitHub configuration at the emulator's GitHub App.
    @Sendable static func useGitHubApp(_ configuration: inout GatewayConfiguration) {
        configuration.github?.clientID = EmulatorConfiguration.demoGitHubAppClient.id
        configuration.github?.clientSecret = EmulatorConfiguration.demoGitHubAppClient.secret
    }

    @Test(
        "refresh answers: invalid_client is the operator's 503 provider-misconfigured (readiness says so), an HTML page or temporarily_unavailable is upstream-unavailable; the grant survives all three; only invalid_grant kills it",
        arguments: refreshing)
    func refreshErrorsAreClassified(_ provider: RefreshingProvider) async throws {
        try await withDeployment(gateway: provider.gateway) { deployment in
            var browser = Browser(deployment)
            let signedIn = try await browser.complete(login: provider.hint, provider: provider.id)
            #expect(signedIn.status == 200, "\(signedIn.bodyText)")
            let live = "\(deployment.gatewayURL)/v1/me/providers/\(provider.id)/profile"
            func fault(status: Int, contentType: String = "application/json", body: String) async throws {
                let escaped = body.replacingOccurrences(of: "\"", with: "\\\"")
                _ = try await deployment.control(
                    "faults",
                    #"{"endpoint": "\#(provider.tokenEndpoint)", "status": \#(status), "headers": {"Content-Type": "\#(contentType)"}, "body": "\#(escaped)", "times": 1}"#
                )
            }
            // The stored access token has expired: a refresh comes first.
            func expired() { deployment.clock.advance(by: provider.tokenLifetime + 60) }
            let refreshes = { try await deployment.emulatorStats()[provider.tokenEndpoint] ?? 0 }

            expired()
            try await fault(
                status: provider.errorStatus == 200 ? 200 : 401, body: #"{"error":"\#(provider.misconfigured)","error_description":"bad secret"}"#)
            let before = try await refreshes()
            let misconfigured = try await browser.send(live)
            #expect(misconfigured.status == 503, "\(misconfigured.bodyText)")
            #expect(try jsonObject(misconfigured)["code"] as? String == "provider-misconfigured")
            #expect(try await refreshes() == before + 1)
            func saysMisconfigured(_ ready: [String: Any]) -> Bool {
                (ready["disabledProviders"] as? [String: String])?[provider.id]?.contains("misconfigured") == true
            }
            let ready = try await deployment.readiness(until: saysMisconfigured)
            #expect(saysMisconfigured(ready), "\(ready)")
            let holds = deployment.logs.lines.contains { $0.contains("provider misconfigured") && $0.contains(provider.id) }
            #expect(holds)

            try await fault(status: 400, contentType: "text/html", body: "<html><body>Proxy says no</body></html>")
            let html = try await browser.send(live)
            #expect(html.status == 502, "\(html.bodyText)")
            #expect(try jsonObject(html)["code"] as? String == "upstream-unavailable")

            try await fault(status: provider.errorStatus, body: #"{"error":"temporarily_unavailable"}"#)
            let busy = try await browser.send(live)
            #expect(busy.status == 503)
            #expect(try jsonObject(busy)["code"] as? String == "upstream-unavailable")

            // A 429 is a rate limit whatever its body's OAuth code.
            _ = try await deployment.control(
                "faults",
                #"{"endpoint": "\#(provider.tokenEndpoint)", "status": 429, "headers": {"Content-Type": "application/json", "Retry-After": "7"}, "body": "{\"error\":\"slow_down\"}", "times": 1}"#
            )
            let limited = try await browser.send(live)
            #expect(limited.status == 429, "\(limited.bodyText)")
            #expect(try jsonObject(limited)["code"] as? String == "upstream-rate-limited")
            #expect(limited.headers["retry-after"] == "7")

            // The grant was never touched: the next refresh works, and readiness recovers.
            let recovered = try await browser.send(live)
            #expect(recovered.status == 200, "\(recovered.bodyText)")
            let readyAgain = try jsonObject(try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/readyz")))
            #expect((readyAgain["disabledProviders"] as? [String: String])?[provider.id] == nil)

            // The provider's dead-grant code, and only that, ends the grant.
            expired()
            try await fault(status: provider.errorStatus, body: #"{"error":"\#(provider.deadGrant)","error_description":"AADSTS70008: expired"}"#)
            let dead = try await browser.send(live)
            #expect(dead.status == 409)
            #expect(try jsonObject(dead)["code"] as? String == "provider-reauth-required")
            #expect(try await browser.send(live).status == 409, "a dead grant stays dead")
        }
    }

    @Test("a GitHub App's expiring user token is refreshed when it expires and when GitHub rejects it, and each refresh token is used once")
    func gitHubAppTokensRefresh() async throws {
        try await withDeployment(gateway: Self.useGitHubApp) { deployment in
            var (browser, live, exchanges) = try await Self.gitHubAppSignIn(deployment)
            let afterSignIn = try await exchanges()
            #expect(try await browser.send(live).status == 200)
            #expect(try await exchanges() == afterSignIn, "a fresh token is not refreshed")

            // Eight hours later: refreshed before the call. The emulator spends a refresh token
            // on use, so the second refresh only works with the rotated one.
            for round in 1...2 {
                deployment.clock.advance(by: 28800 + 60)
                let profile = try await browser.send(live)
                #expect(profile.status == 200, "round \(round): \(profile.bodyText)")
                #expect(try await exchanges() == afterSignIn + round)
            }
            // GitHub rejects the token before the gateway thinks it expired: one refresh, one retry.
            _ = try await deployment.control("expire-tokens", "{}")
            let rejected = try await browser.send(live)
            #expect(rejected.status == 200, "\(rejected.bodyText)")
            #expect(try await exchanges() == afterSignIn + 3)
            let holds = deployment.logs.lines.allSatisfy { !$0.contains("ghr_") && !$0.contains("ghu_") }
            #expect(holds, "no token in a log line")
        }
    }

    /// octocat signed in through a GitHub App (`useGitHubApp`): the browser, the live profile's
    /// URL and the count of GitHub's token exchanges so far (sign-in and refreshes).
    static func gitHubAppSignIn(_ deployment: TestDeployment) async throws -> (
        browser: Browser, live: String, exchanges: @Sendable () async throws -> Int
    ) {
        var browser = Browser(deployment)
        #expect(try await browser.complete(login: "octocat").status == 200)
        return (
            browser, "\(deployment.gatewayURL)/v1/me/providers/github.com/profile",
            { try await deployment.emulatorStats()["POST /github/login/oauth/access_token"] ?? 0 }
        )
    }

    @Test("a configured tenant GUID restricts sign-ins: tenant=common or another tenant is refused at start; the allow-list widens it")
    func configuredTenantIsARestriction() async throws {
        let tenantA = MicrosoftDirectory.tenantA
        let tenantB = MicrosoftDirectory.tenantB
        try await withDeployment(microsoft: { $0.tenant = tenantA.id }) { deployment in
            for tenant in ["common", "organizations", "consumers", tenantB.id, tenantB.domain] {
                var bob = Browser(deployment)
                let refused = try await MicrosoftSignInTests.signIn(&bob, MicrosoftSignInTests.bob, extra: "&tenant=\(tenant)")
                #expect(refused.status == 403, "tenant=\(tenant)")
                #expect(refused.json["code"] as? String == "operation-not-allowed")
            }
            #expect(try await deployment.accountCount() == 0)
            var adele = Browser(deployment)
            #expect(try await MicrosoftSignInTests.signIn(&adele, MicrosoftSignInTests.adele).status == 200)
            var adeleByName = Browser(deployment)
            #expect(try await MicrosoftSignInTests.signIn(&adeleByName, MicrosoftSignInTests.adele, extra: "&tenant=\(tenantA.id)").status == 200)
        }
        try await withDeployment(microsoft: {
            $0.tenant = tenantA.id
            $0.allowedTenants = [tenantB.id]
        }) { deployment async throws in
            var bob = Browser(deployment)
            #expect(try await MicrosoftSignInTests.signIn(&bob, MicrosoftSignInTests.bob, extra: "&tenant=\(tenantB.id)").status == 200)
            var common = Browser(deployment)
            #expect(try await MicrosoftSignInTests.signIn(&common, MicrosoftSignInTests.bob, extra: "&tenant=common").status == 403)
        }
    }

    @Test("a configured tenant domain admits only that tenant's tokens: a code from another tenant's endpoint is refused; the allow-list adds GUIDs")
    func configuredTenantDomainChecksTheTokensTenant() async throws {
        let tenantA = MicrosoftDirectory.tenantA
        let tenantB = MicrosoftDirectory.tenantB
        try await withDeployment(microsoft: { $0.tenant = tenantA.domain }) { deployment in
            var adele = Browser(deployment)
            #expect(try await MicrosoftSignInTests.signIn(&adele, MicrosoftSignInTests.adele).status == 200)
            // The sign-in is sent to contoso's endpoint; Bob answers it at fabrikam's (the app is
            // multi-tenant there) and brings that code back: the gateway redeems it at contoso's.
            let refused = try await Self.swappedTenantSignIn(deployment)
            #expect(refused.status == 401, "\(refused.bodyText)")
            #expect(try jsonObject(refused)["code"] as? String == "invalid-id-token")
            #expect(try await deployment.accountCount() == 1)
        }
        try await withDeployment(microsoft: {
            $0.tenant = tenantA.domain
            $0.allowedTenants = [tenantB.id]
        }) { deployment async throws in
            var adele = Browser(deployment)
            #expect(try await MicrosoftSignInTests.signIn(&adele, MicrosoftSignInTests.adele).status == 200)
            var bob = Browser(deployment)
            #expect(try await MicrosoftSignInTests.signIn(&bob, MicrosoftSignInTests.bob, extra: "&tenant=\(tenantB.id)").status == 200)
        }
        // Unrestricted, a caller's tenant=<domain> holds the same way.
        try await withDeployment { deployment in
            let refused = try await Self.swappedTenantSignIn(deployment, extra: "&tenant=\(tenantA.domain)")
            #expect(refused.status == 401, "\(refused.bodyText)")
            #expect(try jsonObject(refused)["code"] as? String == "invalid-id-token")
            #expect(try await deployment.accountCount() == 0)
        }
    }

    @Test(
        "a tenant domain whose discovery names the {tenantid} template, not a GUID, disables Microsoft (provider-misconfigured), as any wrong issuer does"
    )
    func tenantDomainWithoutItsGUID() async throws {
        let tenantA = MicrosoftDirectory.tenantA
        try await withDeployment(microsoft: { $0.tenant = tenantA.domain }) { deployment in
            let path = "/microsoft/\(tenantA.domain)/v2.0/.well-known/openid-configuration"
            var discovery = try jsonObject(try await deployment.client.execute(OutboundRequest(url: deployment.emulatorURL + path)))
            discovery["issuer"] = "\(deployment.emulatorURL)/microsoft/{tenantid}/v2.0"
            let body = String(decoding: try JSONSerialization.data(withJSONObject: discovery), as: UTF8.self)
            let fault: [String: Any] = ["endpoint": "GET \(path)", "status": 200, "body": body, "times": 20]
            _ = try await deployment.control("faults", String(decoding: try JSONSerialization.data(withJSONObject: fault), as: UTF8.self))
            var adele = Browser(deployment)
            let refused = try await MicrosoftSignInTests.signIn(&adele, MicrosoftSignInTests.adele)
            #expect(refused.status == 503, "\(refused.json)")
            #expect(refused.json["code"] as? String == "provider-misconfigured")
            let ready = try jsonObject(try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/readyz")))
            #expect((ready["disabledProviders"] as? [String: String])?["microsoft.com"]?.contains("issuer") == true, "\(ready)")
        }
    }

    /// Bob's sign-in started at the gateway for contoso (its configured tenant, or `extra`'s),
    /// answered at fabrikam's endpoint instead, its code brought back: the result's answer.
    static func swappedTenantSignIn(_ deployment: TestDeployment, extra: String = "") async throws -> OutboundResponse {
        let tenantA = MicrosoftDirectory.tenantA
        var bob = Browser(deployment)
        let start = try await bob.start(
            "return_to=\(FormEncoding.escape(TestDeployment.returnTo))&login_hint=\(FormEncoding.escape(MicrosoftSignInTests.bob))\(extra)",
            provider: "microsoft.com")
        let authorize = try #require(start.headers["location"])
        #expect(authorize.contains("/microsoft/\(tenantA.domain)/oauth2/v2.0/authorize"))
        let elsewhere = authorize.replacingOccurrences(
            of: "/microsoft/\(tenantA.domain)/", with: "/microsoft/\(MicrosoftDirectory.tenantB.domain)/")
        let approved = try await deployment.client.execute(OutboundRequest(url: elsewhere))
        let callback = try await bob.send(try #require(approved.headers["location"]))
        let location = try #require(callback.headers["location"])
        return try await bob.result(String(location.split(separator: "=").last ?? ""))
    }

    /// Serves `keys` (JSON objects) as the OpenID emulator's JWKS for the next calls.
    static func serveJWKS(_ deployment: TestDeployment, _ keys: [[String: Any]]) async throws {
        let body = String(decoding: try JSONSerialization.data(withJSONObject: ["keys": keys]), as: UTF8.self)
        let fault: [String: Any] = ["endpoint": "GET /oidc/jwks", "status": 200, "body": body, "times": 20]
        _ = try await deployment.control("faults", String(decoding: try JSONSerialization.data(withJSONObject: fault), as: UTF8.self))
    }

    /// The OpenID emulator's real signing key, as its JWKS publishes it.
    static func realKey(_ deployment: TestDeployment) async throws -> [String: Any] {
        let jwks = try jsonObject(try await deployment.client.execute(OutboundRequest(url: "\(deployment.emulatorURL)/oidc/jwks")))
        return try #require((jwks["keys"] as? [[String: Any]])?.first)
    }

    @Test("a JWKS with an AKP, an oct, an X25519 and an encryption key next to the signing key still verifies; each skipped key is logged")
    func hostileJWKSMembersAreSkipped() async throws {
        try await withDeployment { deployment in
            let real = try await Self.realKey(deployment)
            var encryption = real
            encryption["kid"] = "enc-1"
            encryption["use"] = "enc"
            try await Self.serveJWKS(
                deployment,
                [
                    ["kty": "AKP", "alg": "ML-DSA-44", "pub": "AAAA", "kid": "pq-1"],
                    ["kty": "oct", "k": "c2VjcmV0", "kid": "hmac-1"],
                    ["kty": "OKP", "crv": "X25519", "x": "hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo", "kid": "x-1"],
                    encryption, real,
                ])
            var browser = Browser(deployment)
            let signedIn = try await browser.complete(login: Self.olive, provider: "oidc.emulator")
            #expect(signedIn.status == 200, "\(signedIn.bodyText)")
            let skipped = deployment.logs.lines.filter { $0.contains("JWKS key skipped") }
            #expect(skipped.count == 4, "\(skipped)")
        }
    }

    @Test(
        "a JWKS member naming the issuer it signs for binds its key to that issuer; a skipped member of the same kid (an encryption key) binds nothing"
    )
    func keyIssuerComesFromTheUsableMember() async throws {
        try await withDeployment { deployment in
            var real = try await Self.realKey(deployment)
            real["issuer"] = "\(deployment.emulatorURL)/oidc"
            var encryption = real
            encryption["use"] = "enc"
            encryption["issuer"] = "https://elsewhere.example"
            try await Self.serveJWKS(deployment, [real, encryption])
            var browser = Browser(deployment)
            let signedIn = try await browser.complete(login: Self.olive, provider: "oidc.emulator")
            #expect(signedIn.status == 200, "\(signedIn.bodyText)")
        }
        try await withDeployment { deployment in
            var bound = try await Self.realKey(deployment)
            bound["issuer"] = "https://elsewhere.example"
            try await Self.serveJWKS(deployment, [bound])
            var browser = Browser(deployment)
            let refused = try await browser.complete(login: Self.olive, provider: "oidc.emulator")
            #expect(refused.status >= 400 && (try? jsonObject(refused)["code"] as? String) == "invalid-id-token", "\(refused.bodyText)")
        }
    }

    @Test(
        "a lone JWKS key verifies tokens that name no kid, whether it has one or not, with alg or without",
        arguments: [(true, true), (true, false), (false, true), (false, false)])
    func loneKeyVerifiesTokensWithoutKeyID(_ keyHasID: Bool, _ withAlgorithm: Bool) async throws {
        try await withDeployment { deployment in
            var lone = try await Self.realKey(deployment)
            if !keyHasID { lone["kid"] = nil }
            if !withAlgorithm { lone["alg"] = nil }
            try await Self.serveJWKS(deployment, [lone])
            _ = try await deployment.control("oidc/tamper", #"{"issuer": "oidc", "mode": "no-kid"}"#)
            var browser = Browser(deployment)
            let signedIn = try await browser.complete(login: Self.olive, provider: "oidc.emulator")
            #expect(signedIn.status == 200, "kid \(keyHasID), alg \(withAlgorithm): \(signedIn.bodyText)")
        }
    }

    @Test(
        "a key published without alg verifies its own algorithm only: a token whose header names another for it is refused, and genuine tokens keep verifying"
    )
    func keyWithoutAlgorithm() async throws {
        try await withDeployment { deployment in
            var real = try await Self.realKey(deployment)
            let kid = try #require(real["kid"] as? String)
            real["alg"] = nil
            try await Self.serveJWKS(deployment, [real])
            // The first token the key meets names PS512 for it (a genuine payload, the RS256
            // signature left as it is, so it cannot verify under either).
            let genuine = try await OIDCSignInTests.mint(deployment, issuer: "oidc", hint: Self.olive)
            let header = try JSONSerialization.data(withJSONObject: ["alg": "PS512", "kid": kid, "typ": "JWT"])
            let forged = ResultKey.base64url(header) + genuine[genuine.firstIndex(of: ".")!...]
            var attacker = Browser(deployment)
            let refused = try await OIDCSignInTests.idTokenSignIn(&attacker, #"{"providerId": "oidc.emulator", "idToken": "\#(forged)"}"#)
            #expect(refused.status == 400, "\(refused.bodyText)")
            #expect(try jsonObject(refused)["code"] as? String == "invalid-idp-response")
            var browser = Browser(deployment)
            let signedIn = try await browser.complete(login: Self.olive, provider: "oidc.emulator")
            #expect(signedIn.status == 200, "\(signedIn.bodyText)")
        }
    }

    @Test(
        "a JWKS refetched with no usable key (empty, or only keys the gateway skips) keeps the cached keys while they are within their lifetime: sign-ins go on; past it, the keys withdrawn stop verifying"
    )
    func uselessKeySetKeepsTheCachedKeys() async throws {
        // Keys cached for two minutes: the clock passes that without the emulator's ID tokens
        // (an hour) expiring.
        try await withDeployment(openID: { $0.metadataLifetime = 120 }) { deployment in
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: Self.olive, provider: "oidc.emulator").status == 200)
            let fetched = try await deployment.emulatorStats()["GET /oidc/jwks"] ?? 0
            for useless in [[], [["kty": "oct", "k": "c2VjcmV0", "kid": "hmac-1"]]] as [[[String: Any]]] {
                try await Self.serveJWKS(deployment, useless)
                // A token naming a key the cache does not hold makes it refetch, past the cooldown.
                deployment.clock.advance(by: 31)
                let header = Base64URL.encode(Data(#"{"alg":"RS256","kid":"unknown-key","typ":"JWT"}"#.utf8))
                let forged = "\(header).\(Base64URL.encode(Data("{}".utf8))).AAAA"
                let refused = try await browser.json("/v1/auth/idtoken", #"{"providerId": "oidc.emulator", "idToken": "\#(forged)"}"#)
                #expect(refused.status == 400, "\(refused.bodyText)")
                _ = try await deployment.client.execute(OutboundRequest(method: "DELETE", url: "\(deployment.emulatorURL)/_emulator/faults"))
                // Within the cooldown of that refetch, a genuine token verifies with the cached keys.
                var again = Browser(deployment)
                let signedIn = try await again.complete(login: Self.olive, provider: "oidc.emulator")
                #expect(signedIn.status == 200, "\(signedIn.bodyText)")
            }
            #expect(try await deployment.emulatorStats()["GET /oidc/jwks"] == fetched + 2)
            // Past the cached keys' lifetime, a set with no usable key replaces them.
            try await Self.serveJWKS(deployment, [])
            deployment.clock.advance(by: 121)
            var late = Browser(deployment)
            let refused = try await late.complete(login: Self.olive, provider: "oidc.emulator")
            #expect(refused.status >= 400 && (try? jsonObject(refused)["code"] as? String) == "invalid-id-token", "\(refused.bodyText)")
            _ = try await deployment.client.execute(OutboundRequest(method: "DELETE", url: "\(deployment.emulatorURL)/_emulator/faults"))
            deployment.clock.advance(by: 31)
            var back = Browser(deployment)
            let backAgain = try await back.complete(login: Self.olive, provider: "oidc.emulator")
            #expect(backAgain.status == 200, "\(backAgain.bodyText)")
        }
    }

    @Test(
        "a cold cache whose JWKS endpoint fails is refetched at most once per cooldown, and fails closed: every caller meanwhile hears the provider is unavailable, not that its token is invalid"
    )
    func coldCacheRespectsTheCooldown() async throws {
        // Ten minutes: the three attempts fall inside it however slowly they run.
        try await withDeployment(openID: { $0.jwksRefetchCooldown = 600 }) { deployment in
            _ = try await deployment.control("faults", #"{"endpoint": "GET /oidc/jwks", "status": 503, "body": "{}", "times": 100}"#)
            var browser = Browser(deployment)
            for attempt in 0..<3 {
                let rawNonce = "cold-\(attempt)"
                let token = try await OIDCSignInTests.mint(
                    deployment, issuer: "oidc", hint: Self.olive, extra: #", "nonce": "\#(SecureRandom.digest(rawNonce))""#)
                let answer = try await browser.json(
                    "/v1/auth/idtoken", #"{"providerId": "oidc.emulator", "idToken": "\#(token)", "rawNonce": "\#(rawNonce)"}"#)
                // No key is known, so the token's key cannot be said to be unpublished: the
                // first caller and those within the cooldown alike are told to come back.
                #expect(answer.status == 502, "attempt \(attempt): \(answer.bodyText)")
                #expect((try? jsonObject(answer)["code"] as? String) == "upstream-unavailable", "attempt \(attempt): \(answer.bodyText)")
            }
            #expect(try await deployment.emulatorStats()["GET /oidc/jwks"] == 1)
            // After the cooldown the next validation tries again.
            deployment.clock.advance(by: 601)
            let token = try await OIDCSignInTests.mint(
                deployment, issuer: "oidc", hint: Self.olive, extra: #", "nonce": "\#(SecureRandom.digest("late"))""#)
            _ = try await browser.json("/v1/auth/idtoken", #"{"providerId": "oidc.emulator", "idToken": "\#(token)", "rawNonce": "late"}"#)
            #expect(try await deployment.emulatorStats()["GET /oidc/jwks"] == 2)
        }
    }

    /// The emulator's OpenID discovery endpoint, as its statistics name it.
    static let discoveryEndpoint = "GET /oidc/.well-known/openid-configuration"

    @Test("concurrent callers on a cold discovery cache share one fetch: six readiness probes during a 2 s answer cost the provider one call")
    func coldDiscoveryIsFetchedOnce() async throws {
        try await withDeployment { deployment in
            _ = try await deployment.control("faults", #"{"endpoint": "\#(Self.discoveryEndpoint)", "holdMs": 2000, "times": 10}"#)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<6 {
                    group.addTask { try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/readyz")).status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 6))
            #expect(try await deployment.emulatorStats()[Self.discoveryEndpoint] == 1)
        }
    }

    @Test(
        "a provider whose discovery hangs holds readiness half a second, not the upstream timeout: the instance stays ready on the others, says which one, and the fetch goes on"
    )
    func hangingDiscoveryDoesNotHoldReadiness() async throws {
        try await withDeployment { deployment in
            _ = try await deployment.control("faults", #"{"endpoint": "\#(Self.discoveryEndpoint)", "holdMs": 60000, "times": 1}"#)
            let ready = try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/readyz"))
            #expect(ready.status == 200, "\(ready.bodyText)")
            // Answered at the half second, not at the upstream timeout (25 s here) the probe
            // waited before, the provider holding its answer longer: the answer says so. (Its
            // time is not compared: on a loaded run every request of the suite waits its turn.)
            let disabled = try jsonObject(ready)["disabledProviders"] as? [String: String]
            #expect(disabled?["oidc.emulator"]?.contains("did not come within") == true, "\(ready.bodyText)")
            #expect(try await deployment.emulatorStats()[Self.discoveryEndpoint] == 1)
        }
        // An expired document serves a slow hourly refresh: the provider stays ready meanwhile.
        try await withDeployment { deployment in
            let warm = try await deployment.readiness { ($0["providers"] as? [String])?.contains("oidc.emulator") == true }
            #expect((warm["providers"] as? [String])?.contains("oidc.emulator") == true, "\(warm)")
            deployment.clock.advance(by: 3601)
            _ = try await deployment.control("faults", #"{"endpoint": "\#(Self.discoveryEndpoint)", "holdMs": 5000, "times": 1}"#)
            let refreshing = try jsonObject(try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/readyz")))
            #expect((refreshing["providers"] as? [String])?.contains("oidc.emulator") == true, "\(refreshing)")
        }
    }

    @Test(
        "an expired discovery document whose refresh fails keeps serving, and the provider is asked again only after the cooldown, not by every call"
    )
    func failedDiscoveryRefreshCoolsDown() async throws {
        try await withDeployment(openID: { $0.jwksRefetchCooldown = 600 }) { deployment in
            let readiness = "\(deployment.operationsURL)/readyz"
            // The first probe's fetch fills the cache, after that probe on a loaded machine.
            let warm = try await deployment.readiness { ($0["providers"] as? [String])?.contains("oidc.emulator") == true }
            #expect((warm["providers"] as? [String])?.contains("oidc.emulator") == true, "\(warm)")
            #expect(try await deployment.emulatorStats()[Self.discoveryEndpoint] == 1)
            deployment.clock.advance(by: 3601)
            _ = try await deployment.control("faults", #"{"endpoint": "\#(Self.discoveryEndpoint)", "status": 503, "body": "{}", "times": 100}"#)
            for _ in 0..<3 {
                #expect(try await deployment.client.execute(OutboundRequest(url: readiness)).status == 200, "the stale document serves")
            }
            // A sign-in starts with the stale document's authorization endpoint.
            var browser = Browser(deployment)
            _ = try await browser.authorize(login: Self.olive, provider: "oidc.emulator")
            #expect(try await deployment.emulatorStats()[Self.discoveryEndpoint] == 2, "one failed refresh, then the cooldown")
            deployment.clock.advance(by: 601)
            _ = try await deployment.client.execute(OutboundRequest(method: "DELETE", url: "\(deployment.emulatorURL)/_emulator/faults"))
            #expect(try await deployment.client.execute(OutboundRequest(url: readiness)).status == 200)
            #expect(try await deployment.emulatorStats()[Self.discoveryEndpoint] == 3)

            // A refresh slower than a probe's half second fails after its probe stopped waiting:
            // the fetch itself starts the cooldown, and the next caller is served the stale
            // document without asking again.
            deployment.clock.advance(by: 3601)
            _ = try await deployment.control(
                "faults", #"{"endpoint": "\#(Self.discoveryEndpoint)", "status": 503, "body": "{}", "holdMs": 1000, "times": 100}"#)
            #expect(try await deployment.client.execute(OutboundRequest(url: readiness)).status == 200)
            // The held refresh ends a second after it began (bounded: a slower one is joined below).
            try await Task.sleep(for: .seconds(3))
            _ = try await browser.authorize(login: Self.olive, provider: "oidc.emulator")
            #expect(try await deployment.emulatorStats()[Self.discoveryEndpoint] == 4, "one failed refresh, then the cooldown")
        }
    }

    static let olive = "olive@oidc.example"

    @Test(
        "photos: SVG, or HTML declared image/png, is refused before a byte is passed on and never cached; raster answers carry CSP sandbox and nosniff; GATEHOUSE_MAX_PHOTO_BYTES caps the size"
    )
    func onlyRasterPhotos() async throws {
        let avatar = PhotoStreamingTests.avatar
        try await PhotoStreamingTests.withSignedIn(cacheLifetime: 60, gateway: { $0.maxPhotoBytes = 200_000 }) { deployment, uid, key in
            let request = PhotoStreamingTests.request(deployment, uid: uid, key: key)
            let svg = #"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(document.cookie)</script></svg>"#
            _ = try await deployment.control(
                "faults", #"{"endpoint": "\#(avatar)", "status": 200, "headers": {"Content-Type": "image/svg+xml"}, "body": "\#(svg)", "times": 1}"#)
            let scripted = try await deployment.client.execute(request)
            #expect(scripted.status == 502)
            #expect(scripted.headers["content-type"]?.hasPrefix("application/problem+json") == true)
            #expect(!scripted.bodyText.contains("<svg"))
            // A failed source is remembered for a minute (the negative cache): let it pass.
            deployment.clock.advance(by: 61)

            let html = "<html><body>sign in to continue</body></html>"
            _ = try await deployment.control(
                "faults", #"{"endpoint": "\#(avatar)", "status": 200, "headers": {"Content-Type": "image/png"}, "body": "\#(html)", "times": 1}"#)
            let disguised = try await deployment.client.execute(request)
            #expect(disguised.status == 502)
            #expect(!disguised.bodyText.contains("<html"))
            // A failed source is remembered for a minute (the negative cache): let it pass.
            deployment.clock.advance(by: 61)

            _ = try await deployment.control(
                "faults", #"{"endpoint": "\#(avatar)", "status": 200, "headers": {"Content-Type": "image/png"}, "bodyBytes": 300000, "times": 1}"#)
            let large = try await deployment.client.execute(request)
            #expect(large.status == 502, "300,000 bytes are over the 200,000-byte cap")
            // A failed source is remembered for a minute (the negative cache): let it pass.
            deployment.clock.advance(by: 61)

            // The real avatar, streamed on this miss and then from the cache: both with the headers.
            let real = try await deployment.client.execute(request)
            #expect(real.status == 200)
            #expect(real.body.starts(with: [0x89, 0x50, 0x4E, 0x47]))
            #expect(real.headers["content-security-policy"] == "default-src 'none'; sandbox")
            #expect(real.headers["x-content-type-options"] == "nosniff")
            var cached = try await deployment.client.execute(request)
            for _ in 0..<50 where cached.headers["etag"] == nil {
                try await Task.sleep(for: .milliseconds(50))
                cached = try await deployment.client.execute(request)
            }
            #expect(cached.headers["etag"] != nil)
            #expect(cached.headers["content-security-policy"] == "default-src 'none'; sandbox")
            #expect(try await deployment.emulatorStats()[avatar] == 4, "nothing refused was cached")
        }
    }

    @Test(
        "grants refused at refresh with an OAuth error (400 invalid_request, invalid_scope, an unknown code) never open the breaker, however many users meet it, and the grants survive",
        arguments: ["invalid_request", "invalid_scope", "grant_on_hold"])
    func refusedRefreshesCannotOpenTheBreaker(_ code: String) async throws {
        try await withDeployment { deployment in
            var users = [Browser(deployment), Browser(deployment)]
            for (index, login) in [Self.olive, "otto@oidc.example"].enumerated() {
                #expect(try await users[index].complete(login: login, provider: "oidc.emulator").status == 200)
            }
            let live = "\(deployment.gatewayURL)/v1/me/providers/oidc.emulator/profile"
            // Both access tokens expire; each user's refreshes are refused three times, which,
            // counted, would open the breaker (two users, five failures).
            deployment.clock.advance(by: 3660)
            _ = try await deployment.control(
                "faults",
                #"{"endpoint": "POST /oidc/token", "status": 400, "headers": {"Content-Type": "application/json"}, "body": "{\"error\":\"\#(code)\"}", "times": 6}"#
            )
            for _ in 0..<3 {
                for index in users.indices {
                    let refused = try await users[index].send(live)
                    #expect(refused.status == 502, "\(refused.bodyText)")
                    #expect(try jsonObject(refused)["code"] as? String == "upstream-unavailable")
                }
            }
            #expect(try await ResilienceTests.metric(deployment, "gatehouse_circuit_state", ["provider": "oidc.emulator"]) == 0)
            // Refused, not dead: the next refresh the provider honours serves the profile.
            for index in users.indices {
                let recovered = try await users[index].send(live)
                #expect(recovered.status == 200, "\(recovered.bodyText)")
            }
        }
    }

    /// Makes the OpenID emulator answer `url` as Olive's `picture`.
    static func choosePicture(_ deployment: TestDeployment, _ url: String, for login: String = olive) async throws {
        _ = try await deployment.control("oidc/picture", #"{"issuer": "oidc", "hint": "\#(login)", "url": "\#(url)"}"#)
    }

    @Test(
        "one user's broken photo source never opens the provider's breaker for others: six failures are 502 photo-unavailable, another user's profile still 200"
    )
    func oneUsersPhotoCannotOpenTheBreaker() async throws {
        try await withDeployment { deployment in
            try await Self.choosePicture(deployment, "\(deployment.emulatorURL)/oidc/pictures/broken")
            _ = try await deployment.control(
                "faults",
                #"{"endpoint": "GET /oidc/pictures/broken", "status": 200, "headers": {"Content-Type": "text/html"}, "body": "<html></html>", "times": 20}"#
            )
            var olive = Browser(deployment)
            #expect(try await olive.complete(login: Self.olive, provider: "oidc.emulator").status == 200)
            for _ in 0..<6 {
                let photo = try await olive.send("\(deployment.gatewayURL)/v1/me/photo")
                #expect(photo.status == 502)
                #expect(try jsonObject(photo)["code"] as? String == "photo-unavailable")
            }
            var otto = Browser(deployment)
            #expect(try await otto.complete(login: "otto@oidc.example", provider: "oidc.emulator").status == 200)
            let profile = try await otto.send("\(deployment.gatewayURL)/v1/me/providers/oidc.emulator/profile")
            #expect(profile.status == 200, "\(profile.bodyText)")
            #expect(try await ResilienceTests.metric(deployment, "gatehouse_circuit_state", ["provider": "oidc.emulator"]) == 0)
        }
    }

    @Test(
        "photo URLs: only the issuer's origin or a configured prefix (parsed, segment boundary), never another local server; one uniform photo-unavailable"
    )
    func pictureAllowList() async throws {
        try await withDeployment(openID: {
            $0.pictureURLPrefixes = [$0.issuer.replacingOccurrences(of: "127.0.0.1", with: "localhost") + "/pictures"]
        }) {
            deployment in
            var olive = Browser(deployment)
            #expect(try await olive.complete(login: Self.olive, provider: "oidc.emulator").status == 200)
            // Another server on this machine (the gateway itself stands for it): never fetched.
            try await Self.choosePicture(deployment, "\(deployment.operationsURL)/metrics")
            #expect(try await olive.complete(login: Self.olive, provider: "oidc.emulator").status == 200)
            let local = try await olive.send("\(deployment.gatewayURL)/v1/me/photo")
            #expect(local.status == 404)
            #expect(try jsonObject(local)["code"] as? String == "no-photo")
            // A raw prefix match would admit this one: the configured prefix ends at a segment.
            let emulatorLocalhost = deployment.emulatorURL.replacingOccurrences(of: "127.0.0.1", with: "localhost")
            try await Self.choosePicture(deployment, "\(emulatorLocalhost)/oidc/pictures-elsewhere/x")
            #expect(try await olive.complete(login: Self.olive, provider: "oidc.emulator").status == 200)
            #expect(try await olive.send("\(deployment.gatewayURL)/v1/me/photo").status == 404)
            let stats = try await deployment.emulatorStats()
            #expect(stats["GET /oidc/pictures-elsewhere/x"] == nil)
            // Under the configured prefix: fetched.
            try await Self.choosePicture(deployment, "\(emulatorLocalhost)/oidc/pictures/olive-elsewhere")
            _ = try await deployment.control(
                "faults", #"{"endpoint": "GET /oidc/pictures/olive-elsewhere", "status": 404, "body": "{}", "times": 1}"#)
            #expect(try await olive.complete(login: Self.olive, provider: "oidc.emulator").status == 200)
            _ = try await olive.send("\(deployment.gatewayURL)/v1/me/photo")
            #expect(try await deployment.emulatorStats()["GET /oidc/pictures/olive-elsewhere"] == 1)
        }
    }

    @Test("outside development mode photo fetches refuse internal addresses after DNS resolution (a name that resolves to loopback too)")
    func photoFetchesRefuseInternalAddresses() async throws {
        try await withDeployment(
            openID: { $0.pictureURLPrefixes = [$0.issuer.replacingOccurrences(of: "127.0.0.1", with: "localhost") + "/pictures"] },
            gateway: { $0.allowPrivatePhotoAddresses = false }
        ) { deployment in
            var olive = Browser(deployment)
            #expect(try await olive.complete(login: Self.olive, provider: "oidc.emulator").status == 200)
            let byAddress = try await olive.send("\(deployment.gatewayURL)/v1/me/photo")
            #expect(byAddress.status == 502)
            #expect(try jsonObject(byAddress)["code"] as? String == "photo-unavailable")
            #expect(try jsonObject(byAddress)["detail"] as? String == "The photo could not be fetched from its source.")
            let emulatorLocalhost = deployment.emulatorURL.replacingOccurrences(of: "127.0.0.1", with: "localhost")
            try await Self.choosePicture(deployment, "\(emulatorLocalhost)/oidc/pictures/by-name")
            #expect(try await olive.complete(login: Self.olive, provider: "oidc.emulator").status == 200)
            let byName = try await olive.send("\(deployment.gatewayURL)/v1/me/photo")
            #expect(byName.status == 502)
            #expect(try jsonObject(byName)["code"] as? String == "photo-unavailable")
            let stats = try await deployment.emulatorStats()
            let holds = stats.keys.filter { $0.contains("/pictures/") }.isEmpty
            #expect(holds, "no picture request reached the emulator: \(stats)")
            // The cause is in the log, not in the answer.
            let holds2 = deployment.logs.lines.contains { $0.contains("upstream failure") && $0.contains("photo-unavailable") }
            #expect(holds2)
        }
    }

    @Test(
        "a failed photo source is remembered per user (polling reaches it once); a host failing again and again for two users' photos is left alone by its own breaker, for one user's alone it is not; the provider's API is untouched"
    )
    func photoFailuresAreRememberedAndHostsBroken() async throws {
        // A minute's memory and a breaker open for ten: the steps between two moves of the clock
        // stay inside them however loaded the machine.
        try await withDeployment(gateway: {
            $0.photoFailureLifetime = 60
            $0.circuitBreaker.openDuration = 600
        }) { deployment in
            let down = "GET /oidc/pictures/down"
            try await Self.choosePicture(deployment, "\(deployment.emulatorURL)/oidc/pictures/down")
            try await Self.choosePicture(deployment, "\(deployment.emulatorURL)/oidc/pictures/down", for: "otto@oidc.example")
            _ = try await deployment.control("faults", #"{"endpoint": "\#(down)", "status": 503, "body": "{}", "times": 100}"#)
            var olive = Browser(deployment)
            #expect(try await olive.complete(login: Self.olive, provider: "oidc.emulator").status == 200)
            let photo = "\(deployment.gatewayURL)/v1/me/photo"
            for _ in 0..<6 {
                let answer = try await olive.send(photo)
                #expect(answer.status == 502)
                #expect(try jsonObject(answer)["code"] as? String == "photo-unavailable")
            }
            #expect(try await deployment.emulatorStats()[down] == 1, "polling reached the failing source once")
            // Once the memory lapses the source is tried again. Six failures in a row, all of
            // one user's photo, leave the host's breaker closed: the next try reaches it.
            for _ in 0..<5 {
                deployment.clock.advance(by: 61)
                #expect(try await olive.send(photo).status == 502)
            }
            #expect(try await deployment.emulatorStats()[down] == 6)
            // Another user's photo failing there too opens it (for ten minutes): the next try,
            // once olive's memory of the failure lapsed, does not reach the host.
            var otto = Browser(deployment)
            #expect(try await otto.complete(login: "otto@oidc.example", provider: "oidc.emulator").status == 200)
            #expect(try await otto.send(photo).status == 502)
            #expect(try await deployment.emulatorStats()[down] == 7)
            deployment.clock.advance(by: 61)
            let refused = try await olive.send(photo)
            #expect(refused.status == 502)
            #expect(try jsonObject(refused)["code"] as? String == "photo-unavailable")
            #expect(try await deployment.emulatorStats()[down] == 7)
            let holds = deployment.logs.lines.contains { $0.contains("has been failing; not calling it for now") }
            #expect(holds)
            // The provider's API and its breaker are untouched.
            #expect(try await otto.send("\(deployment.gatewayURL)/v1/me/providers/oidc.emulator/profile").status == 200)
            #expect(try await ResilienceTests.metric(deployment, "gatehouse_circuit_state", ["provider": "oidc.emulator"]) == 0)
        }
    }

    @Test(
        "every photo 200 has an ETag derived at the head: streamed and cached answers agree, a revalidated miss is 304; a Last-Modified-only host is tagged too"
    )
    func photoTagsAtTheHead() async throws {
        try await PhotoStreamingTests.withSignedIn(cacheLifetime: 60) { deployment, uid, key in
            let request = PhotoStreamingTests.request(deployment, uid: uid, key: key)
            let streamed = try await deployment.client.execute(request)
            let tag = try #require(streamed.headers["etag"])
            #expect(tag.hasPrefix("\"") && tag.count > 10)
            #expect(try await deployment.client.execute(request).headers["etag"] == tag)
            // A miss revalidated with the current tag is 304 without a body.
            deployment.clock.advance(by: 61)
            let notModified = try await deployment.client.execute(
                PhotoStreamingTests.request(deployment, uid: uid, key: key, headers: ["If-None-Match": tag]))
            #expect(notModified.status == 304)
            #expect(notModified.body.isEmpty)
            #expect(try await deployment.emulatorStats()[PhotoStreamingTests.avatar] == 2)
        }
        // A picture host that sends only Last-Modified: tagged too.
        try await withDeployment { deployment in
            var olive = Browser(deployment)
            #expect(try await olive.complete(login: Self.olive, provider: "oidc.emulator").status == 200)
            let photo = try await olive.send("\(deployment.gatewayURL)/v1/me/photo")
            #expect(photo.status == 200)
            #expect(photo.headers["etag"] != nil)
        }
    }
}
