import CurlClient
import Foundation
import GatehouseCore
import ProviderEmulator
import Testing

/// Microsoft sign-in (Entra ID work accounts, personal accounts), Graph profiles and photo
/// binaries, token refresh — end to end against the emulator.
@Suite("Microsoft sign-in")
struct MicrosoftSignInTests {
    static let adele = "AdeleV@contoso.example"
    static let bob = "BobK@fabrikam.example"
    static let steven = "steven@outlook.example"
    static let mallory = "mallory@contoso.example"

    static func signIn(_ browser: inout Browser, _ login: String, extra: String = "") async throws -> (status: Int, json: [String: Any]) {
        let returnTo = FormEncoding.escape(TestDeployment.returnTo)
        let start = try await browser.start("return_to=\(returnTo)&login_hint=\(FormEncoding.escape(login))\(extra)", provider: "microsoft.com")
        guard start.status == 302, let authorize = start.headers["location"] else {
            return (start.status, try jsonObject(start))
        }
        let approved = try await browser.deployment.client.execute(OutboundRequest(url: authorize))
        let callback = try await browser.send(try #require(approved.headers["location"]))
        let location = try #require(callback.headers["location"])
        let result = try await browser.result(String(location.split(separator: "=").last ?? ""))
        return (result.status, try jsonObject(result))
    }

    /// Width and height from a JPEG's SOF0 segment.
    static func jpegSize(_ bytes: [UInt8]) -> (Int, Int)? {
        var index = 2
        while index + 9 < bytes.count {
            guard bytes[index] == 0xFF else { return nil }
            let marker = bytes[index + 1]
            let length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
            if marker == 0xC0 {
                return (Int(bytes[index + 7]) << 8 | Int(bytes[index + 8]), Int(bytes[index + 5]) << 8 | Int(bytes[index + 6]))
            }
            index += 2 + length
        }
        return nil
    }

    @Test("work account with photo: oid as federated id, verified email (xms_edov), Graph profile, nine photo sizes with fallback, ETag/304")
    func workAccountWithPhoto() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let (status, json) = try await Self.signIn(&browser, Self.adele)
            #expect(status == 200)
            let user = try #require(json["user"] as? [String: Any])
            #expect(user["email"] as? String == Self.adele)
            #expect(user["emailVerified"] as? Bool == true)
            #expect(user["locale"] as? String == "en-US")
            #expect((user["photoURL"] as? String)?.hasPrefix(deployment.gatewayURL) == true)
            let entry = try #require((user["providers"] as? [[String: Any]])?.first)
            #expect(entry["federatedId"] as? String == "87d349ed-44d7-43e1-9a83-5f2406dee5bd")
            #expect(entry["tenantId"] as? String == MicrosoftDirectory.tenantA.id)
            #expect(entry["jobTitle"] as? String == "Retail Manager")
            #expect(entry["username"] as? String == Self.adele)

            for size in [48, 64, 96, 120, 240, 360, 432, 504, 648] {
                let photo = try await browser.send("\(deployment.gatewayURL)/v1/me/photo?size=\(size)")
                #expect(photo.status == 200)
                #expect(photo.headers["content-type"] == "image/jpeg")
                // 648 is larger than the 504 upload: the nearest smaller size is served.
                let expected = min(size, 504)
                let holds = Self.jpegSize(photo.body).map { [$0.0, $0.1] } == [expected, expected]
                #expect(holds, "size \(size)")
            }
            let full = try await browser.send("\(deployment.gatewayURL)/v1/me/photo")
            let holds2 = Self.jpegSize(full.body).map { $0.0 } == 504
            #expect(holds2)
            // The cache is off here: every answer comes from Graph; a caller who revalidates
            // always gets the tag (the whole photo is awaited).
            let tagged = try await browser.send("\(deployment.gatewayURL)/v1/me/photo", headers: ["If-None-Match": "\"older\""])
            #expect(tagged.status == 200)
            #expect(tagged.body == full.body)
            let etag = try #require(tagged.headers["etag"])
            let cached = try await browser.send("\(deployment.gatewayURL)/v1/me/photo", headers: ["If-None-Match": etag])
            #expect(cached.status == 304)
            let stats = try await deployment.emulatorStats()
            // One code, one redemption: the exchange is never repeated.
            #expect(stats["POST /microsoft/common/oauth2/v2.0/token"] == 1)
            #expect(stats["GET /graph/v1.0/me/photos/648x648/$value"] == 1)
            try await OIDCSignInTests.expectNoSecretsLogged(deployment)
            let logs = deployment.logs.lines.joined(separator: "\n")
            #expect(!logs.contains(EmulatorConfiguration.demoMicrosoftClient.secret))
        }
    }

    @Test("work account without photo: 404 no-photo and photoURL null")
    func workAccountWithoutPhoto() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let (status, json) = try await Self.signIn(&browser, Self.bob)
            #expect(status == 200)
            let user = try #require(json["user"] as? [String: Any])
            #expect(user["photoURL"] is NSNull)
            let photo = try await browser.send("\(deployment.gatewayURL)/v1/me/photo")
            #expect(photo.status == 404)
            #expect(try jsonObject(photo)["code"] as? String == "no-photo")
        }
    }

    @Test("personal account: email from userPrincipalName, padded oid, consumers tenant, no photo")
    func personalAccount() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let (status, json) = try await Self.signIn(&browser, Self.steven)
            #expect(status == 200)
            let user = try #require(json["user"] as? [String: Any])
            #expect(user["email"] as? String == Self.steven)
            #expect(user["photoURL"] is NSNull)
            let entry = try #require((user["providers"] as? [[String: Any]])?.first)
            #expect(entry["federatedId"] as? String == "00000000-0000-0000-fde9-26f844473904")
            #expect(entry["tenantId"] as? String == MicrosoftDirectory.consumersTenant)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me/photo").status == 404)
        }
    }

    @Test("nOAuth: an email claim the tenant did not verify is never marked verified")
    func unverifiedEmailClaim() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let (status, json) = try await Self.signIn(&browser, Self.mallory)
            #expect(status == 200)
            let user = try #require(json["user"] as? [String: Any])
            #expect(user["email"] as? String == "victim@victim.example")
            #expect(user["emailVerified"] as? Bool == false)
        }
    }

    @Test("tenant allow-list refuses a foreign tenant; tenant= routes the flow to that tenant's endpoints")
    func tenantRestriction() async throws {
        try await withDeployment(microsoft: { $0.allowedTenants = [MicrosoftDirectory.tenantA.id] }) { restricted in
            var foreign = Browser(restricted)
            let refused = try await Self.signIn(&foreign, Self.bob)
            #expect(refused.status == 403)
            #expect(refused.json["code"] as? String == "operation-not-allowed")
            #expect(try await restricted.accountCount() == 0)
            var allowed = Browser(restricted)
            #expect(try await Self.signIn(&allowed, Self.adele).status == 200)
        }

        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let routed = try await Self.signIn(&browser, Self.bob, extra: "&tenant=fabrikam.example")
            #expect(routed.status == 200)
            let stats = try await deployment.emulatorStats()
            #expect(stats["GET /microsoft/fabrikam.example/oauth2/v2.0/authorize"] == 1)
            #expect(stats["POST /microsoft/fabrikam.example/oauth2/v2.0/token"] == 1)
            // The emulated tenant B refuses a user of tenant A: an error result, no account for her.
            var wrongTenant = Browser(deployment)
            let denied = try await Self.signIn(&wrongTenant, Self.adele, extra: "&tenant=\(MicrosoftDirectory.tenantB.id)")
            #expect(denied.json["code"] as? String == "invalid-idp-response")
            #expect(try await deployment.accountCount() == 1)
            var invalid = Browser(deployment)
            let bad = try await invalid.start(
                "return_to=\(FormEncoding.escape(TestDeployment.returnTo))&tenant=not%20a%20tenant", provider: "microsoft.com")
            #expect(bad.status == 400)
        }
    }

    @Test(
        "a configured audience is a restriction: under organizations, tenant= cannot name common, consumers or the personal accounts' tenant; under consumers, nothing else"
    )
    func audienceRestriction() async throws {
        let refusedUnder = [
            "organizations": ["common", "consumers", MicrosoftDirectory.consumersTenant, MicrosoftDirectory.consumersTenant.uppercased()],
            "consumers": ["common", "organizations", MicrosoftDirectory.tenantA.id, MicrosoftDirectory.tenantA.domain],
        ]
        let allowedUnder = [
            "organizations": ["organizations", MicrosoftDirectory.tenantA.id, MicrosoftDirectory.tenantB.domain],
            "consumers": ["consumers", MicrosoftDirectory.consumersTenant],
        ]
        for audience in ["organizations", "consumers"] {
            try await withDeployment(microsoft: { $0.tenant = audience }) { deployment in
                func start(_ tenant: String) async throws -> OutboundResponse {
                    var caller = Browser(deployment)
                    return try await caller.start(
                        "return_to=\(FormEncoding.escape(TestDeployment.returnTo))&tenant=\(tenant)", provider: "microsoft.com")
                }
                for tenant in refusedUnder[audience] ?? [] {
                    let refused = try await start(tenant)
                    #expect(refused.status == 403, "\(audience): \(tenant) \(refused.bodyText)")
                    #expect(try jsonObject(refused)["code"] as? String == "operation-not-allowed", "\(audience): \(tenant)")
                }
                for tenant in allowedUnder[audience] ?? [] {
                    let started = try await start(tenant)
                    #expect(started.status == 302, "\(audience): \(tenant) \(started.bodyText)")
                }
                // The personal account the audience keeps out does not get in through tenant=.
                var personal = Browser(deployment)
                let (status, json) = try await Self.signIn(&personal, audience == "organizations" ? Self.steven : Self.adele, extra: "&tenant=common")
                #expect(status == 403 && json["code"] as? String == "operation-not-allowed", "\(audience): \(status) \(json)")
                #expect(try await deployment.accountCount() == 0)
            }
        }
    }

    /// The emulator's count of discovery reads for `tenant`.
    static func discoveryReads(_ stats: [String: Int], _ tenant: String) -> Int {
        stats["GET /microsoft/\(tenant)/v2.0/.well-known/openid-configuration"] ?? 0
    }

    @Test(
        "tenant= naming tenants by the dozen: the configured tenant's discovery is never read again, and tenants Microsoft does not know take no place"
    )
    func tenantEnginesAreBounded() async throws {
        try await withDeployment(gateway: { $0.authRateLimitPerMinute = 0 }) { deployment in
            var browser = Browser(deployment)
            #expect(try await Self.signIn(&browser, Self.adele).status == 200)
            #expect(Self.discoveryReads(try await deployment.emulatorStats(), "common") == 1)
            /// Starts a sign-in at `tenant`; the status of the start.
            func start(_ tenant: String) async throws -> Int {
                var caller = Browser(deployment)
                return try await caller.start(
                    "return_to=\(FormEncoding.escape(TestDeployment.returnTo))&tenant=\(tenant)", provider: "microsoft.com"
                ).status
            }
            #expect(try await start("organizations") == 302)
            // 70 tenants Microsoft does not know (400 at start), with one known tenant in use
            // throughout (named again after every 32).
            for index in 0..<70 {
                if index % 32 == 0 { #expect(try await start("fabrikam.example") == 302) }
                #expect(try await start("t\(index).example") == 400, "t\(index).example")
            }
            // The configured tenant's discovery was kept, and so were the others': the unknown
            // tenants gave their places up (MicrosoftEnginesTests: the least recently used of
            // 64 known ones goes first).
            var again = Browser(deployment)
            #expect(try await Self.signIn(&again, Self.adele).status == 200)
            #expect(try await start("fabrikam.example") == 302)
            #expect(try await start("organizations") == 302)
            let stats = try await deployment.emulatorStats()
            #expect(Self.discoveryReads(stats, "common") == 1, "\(Self.discoveryReads(stats, "common")) discovery reads")
            #expect(Self.discoveryReads(stats, "fabrikam.example") == 1, "\(Self.discoveryReads(stats, "fabrikam.example")) discovery reads")
            #expect(Self.discoveryReads(stats, "organizations") == 1)
            #expect(Self.discoveryReads(stats, "t0.example") == 1)
        }
    }

    @Test(
        "issuer/tid mismatch, wrong aud, expired, bad signature, wrong nonce, a key of another tenant's issuer → rejected, no session, no account",
        arguments: ["wrong-iss", "wrong-aud", "expired", "bad-signature", "wrong-nonce", "other-tenant-key"])
    func rejection(mode: String) async throws {
        try await withDeployment { deployment in
            #expect(try await deployment.control("oidc/tamper", #"{"issuer": "microsoft", "mode": "\#(mode)"}"#).status == 201)
            var browser = Browser(deployment)
            let (status, json) = try await Self.signIn(&browser, Self.adele)
            #expect(status >= 400)
            let expected = ["expired": "id-token-expired", "wrong-nonce": "missing-or-invalid-nonce"][mode] ?? "invalid-id-token"
            #expect(json["code"] as? String == expected)
            let holds = browser.jar.cookies.keys.allSatisfy { !$0.contains("session") }
            #expect(holds)
            #expect(try await deployment.accountCount() == 0)
            #expect(try await deployment.emulatorStats()["GET /graph/v1.0/me"] == nil)
        }
    }

    @Test("expired access token: 20 concurrent profile requests share exactly one refresh, and all succeed")
    func singleFlightRefresh() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            #expect(try await Self.signIn(&browser, Self.adele).status == 200)
            _ = try await deployment.control("expire-tokens", "{}")
            let cookies = browser.jar.header
            let url = "\(deployment.gatewayURL)/v1/me/providers/microsoft.com/profile"
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await deployment.client.execute(OutboundRequest(url: url, headers: cookies)).status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 20))
            let stats = try await deployment.emulatorStats()
            #expect(stats["POST /microsoft/common/oauth2/v2.0/token"] == 2)  // the sign-in and one refresh
            #expect(
                try await ResilienceTests.metric(deployment, "gatehouse_token_refreshes_total", ["provider": "microsoft.com", "outcome": "ok"]) == 1)
            // The rotated refresh token was kept: a second expiry refreshes again.
            _ = try await deployment.control("expire-tokens", "{}")
            #expect(try await browser.send(url).status == 200)
            #expect(try await deployment.emulatorStats()["POST /microsoft/common/oauth2/v2.0/token"] == 3)
            let profile = try jsonObject(try await browser.send(url))
            #expect(profile["emailVerified"] as? Bool == true)
        }
    }

    @Test(
        "a tenant that disabled or removed the gateway's app (unauthorized_client) refuses its own users' refresh and sign-in only: Microsoft is never marked misconfigured for everyone, and the grant is kept"
    )
    func aTenantRefusingTheAppIsItsOwnRefusal() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            #expect(try await Self.signIn(&browser, Self.adele).status == 200)
            let live = "\(deployment.gatewayURL)/v1/me/providers/microsoft.com/profile"
            let refusal =
                #"{"endpoint": "POST /microsoft/common/oauth2/v2.0/token", "status": 400, "headers": {"Content-Type": "application/json"}, "body": "{\"error\":\"unauthorized_client\",\"error_description\":\"AADSTS7000112: Application is disabled.\"}", "times": 1}"#
            @Sendable func microsoftReady() async throws -> Bool {
                let ready = try jsonObject(try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/readyz")))
                return (ready["disabledProviders"] as? [String: String])?["microsoft.com"] == nil
            }
            // The access token has expired: the refresh meets the tenant's refusal.
            deployment.clock.advance(by: 3660)
            #expect(try await deployment.control("faults", refusal).status == 201)
            let refused = try await browser.send(live)
            #expect(refused.status >= 500, "\(refused.bodyText)")
            #expect(try jsonObject(refused)["code"] as? String == "upstream-unavailable", "\(refused.bodyText)")
            #expect(try await microsoftReady(), "one tenant's refusal is not the provider's")
            // A sign-in whose code exchange meets it fails alone.
            #expect(try await deployment.control("faults", refusal).status == 201)
            var other = Browser(deployment)
            let failed = try await Self.signIn(&other, Self.bob)
            #expect(failed.json["code"] as? String == "invalid-idp-response", "\(failed.json)")
            #expect(try await microsoftReady())
            let holds = deployment.logs.lines.contains { $0.contains("provider misconfigured") }
            #expect(!holds)
            // The grant was kept: the next refresh works.
            #expect(try await browser.send(live).status == 200)
        }
    }

    @Test("revoked refresh token → 409 provider-reauth-required, and the dead link is not retried")
    func revokedRefreshToken() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            #expect(try await Self.signIn(&browser, Self.adele).status == 200)
            _ = try await deployment.control("expire-tokens", "{}")
            _ = try await deployment.control("microsoft/revoke-refresh-tokens", "{}")
            let url = "\(deployment.gatewayURL)/v1/me/providers/microsoft.com/profile"
            let first = try await browser.send(url)
            #expect(first.status == 409)
            let problem = try jsonObject(first)
            #expect(problem["code"] as? String == "provider-reauth-required")
            #expect(problem["providerId"] as? String == "microsoft.com")
            let tokenCalls = try await deployment.emulatorStats()["POST /microsoft/common/oauth2/v2.0/token"]
            #expect(try await browser.send(url).status == 409)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me/photo").status == 409)
            #expect(try await deployment.emulatorStats()["POST /microsoft/common/oauth2/v2.0/token"] == tokenCalls)
            // Signing in again revives the link.
            var again = Browser(deployment)
            #expect(try await Self.signIn(&again, Self.adele).status == 200)
            #expect(try await again.send(url).status == 200)
        }
    }

    @Test("Graph 429 → 429 upstream-rate-limited with Retry-After, 503 → 503 upstream-unavailable; a bare Microsoft access token cannot sign in")
    func rateLimitAndAccessTokenSignIn() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            #expect(try await Self.signIn(&browser, Self.adele).status == 200)
            _ = try await deployment.control(
                "faults", #"{"endpoint": "GET /graph/v1.0/me", "status": 429, "headers": {"Retry-After": "7"}, "times": 1}"#)
            let limited = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/microsoft.com/profile")
            #expect(limited.status == 429)
            #expect(limited.headers["retry-after"] == "7")
            #expect(try jsonObject(limited)["code"] as? String == "upstream-rate-limited")
            _ = try await deployment.control("faults", #"{"endpoint": "GET /graph/v1.0/me", "status": 503, "times": 1}"#)
            let unavailable = try await browser.send("\(deployment.gatewayURL)/v1/me/providers/microsoft.com/profile")
            #expect(unavailable.status == 503)
            #expect(try jsonObject(unavailable)["code"] as? String == "upstream-unavailable")
            let refused = try await browser.send(
                "\(deployment.gatewayURL)/v1/auth/idtoken", method: "POST", headers: ["Content-Type": "application/json"],
                body: Array(#"{"providerId": "microsoft.com", "accessToken": "EwAabc"}"#.utf8))
            #expect(refused.status == 400)
            #expect(try jsonObject(refused)["code"] as? String == "operation-not-allowed")
        }
    }
}
