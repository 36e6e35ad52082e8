import CurlClient
import Foundation
import GatehouseCore
import Testing

/// Internal services: service keys, profiles and photos by uid, admin operations.
@Suite("Service keys and /v1/users")
struct ServiceKeyRoutesTests {
    /// A GET or POST with a bearer key.
    static func call(_ deployment: TestDeployment, _ path: String, key: String?, method: String = "GET", headers: OutboundHeaders = [:])
        async throws -> OutboundResponse
    {
        var all = headers
        if let key { all.add("Authorization", "Bearer \(key)") }
        return try await deployment.client.execute(OutboundRequest(method: method, url: deployment.gatewayURL + path, headers: all))
    }

    @Test("lookup by email finds only accounts whose provider verified the address; includeUnverified=true adds the others, marked")
    func lookupByEmailIsVerifiedOnly() async throws {
        try await withDeployment { deployment in
            // Yahoo merely claims Sam's address (the older account); GitHub verified it.
            var claimer = Browser(deployment)
            let claimed = try account(try await claimer.complete(login: "sam@yahoo.example", provider: "yahoo.com")).uid
            var owner = Browser(deployment)
            let verified = try account(try await owner.complete(login: "sam-shared")).uid
            #expect(claimed != verified)
            let storage = try GatehouseSQLiteStorageForSpec.open(deployment.databasePath)
            let admin = try await ServiceKeyService(storage: storage).create(name: "ops", scopes: ["admin"])
            func users(_ query: String) async throws -> [[String: Any]] {
                let response = try await Self.call(deployment, "/v1/users?\(query)", key: admin.secret)
                #expect(response.status == 200, "\(response.bodyText)")
                return try jsonObject(response)["users"] as? [[String: Any]] ?? []
            }
            let found = try await users("email=Sam.Shared@example.com")
            let holds = found.map { $0["uid"] as? String } == [verified]
            #expect(holds)
            let holds2 = found.map { $0["emailMatch"] as? String } == ["verified"]
            #expect(holds2)
            let widened = try await users("email=sam.shared@example.com&includeUnverified=true")
            let holds3 = widened.map { $0["uid"] as? String } == [claimed, verified]
            #expect(holds3)
            let holds4 = widened.map { $0["emailMatch"] as? String } == ["unverified", "verified"]
            #expect(holds4)
            #expect(try await Self.call(deployment, "/v1/users?email=sam.shared@example.com&includeUnverified=yes", key: admin.secret).status == 400)
        }
    }

    @Test(
        "key lifecycle and scopes: 401 without or with a wrong or revoked key, 403 without the scope; profile, provider profile and photo by uid; admin disable/enable/revoke-sessions"
    )
    func lifecycle() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let resultID = try await browser.signIn(login: "octocat")
            let uid = try #require((try jsonObject(try await browser.result(resultID))["user"] as? [String: Any])?["uid"] as? String)
            let storage = try GatehouseSQLiteStorageForSpec.open(deployment.databasePath)
            let keys = ServiceKeyService(storage: storage)
            let reader = try await keys.create(name: "profiles", scopes: ["profile:read", "photo:read"])
            let admin = try await keys.create(name: "ops", scopes: ["admin"])
            #expect(reader.secret.hasPrefix("ghsk_"))
            let holds = try await storage.serviceKeys().allSatisfy { $0.secretHash != reader.secret && $0.secretHash != admin.secret }
            #expect(holds)

            #expect(try await Self.call(deployment, "/v1/users/\(uid)", key: nil).status == 401)
            #expect(try await Self.call(deployment, "/v1/users/\(uid)", key: "ghsk_wrong").status == 401)
            let denied = try await Self.call(deployment, "/v1/users/\(uid)", key: admin.secret)
            #expect(denied.status == 403)
            #expect(try jsonObject(denied)["code"] as? String == "permission-denied")

            let profile = try await Self.call(deployment, "/v1/users/\(uid)", key: reader.secret)
            #expect(profile.status == 200)
            #expect(try jsonObject(profile)["uid"] as? String == uid)
            // A service's profile names the account's photo, which its key fetches; the user's
            // own profile names /v1/me/photo, which answers for whoever's cookie comes with it.
            let servicePhoto = "\(deployment.gatewayURL)/v1/users/\(uid)/photo"
            #expect(try jsonObject(profile)["photoURL"] as? String == servicePhoto, "\(profile.bodyText)")
            let entries = try jsonObject(profile)["providers"] as? [[String: Any]]
            #expect(entries?.first?["photoURL"] as? String == servicePhoto + "?provider=github.com", "\(profile.bodyText)")
            let own = try jsonObject(try await browser.send("\(deployment.gatewayURL)/v1/me"))
            #expect(own["photoURL"] as? String == "\(deployment.gatewayURL)/v1/me/photo", "\(own)")
            #expect(try await Self.call(deployment, "/v1/users/nobody", key: reader.secret).status == 404)
            let live = try await Self.call(deployment, "/v1/users/\(uid)/providers/github.com/profile", key: reader.secret)
            #expect(try jsonObject(live)["username"] as? String == "octocat")
            let photo = try await Self.call(deployment, "/v1/users/\(uid)/photo?size=96", key: reader.secret)
            #expect(photo.status == 200)
            #expect(photo.headers["content-type"] == "image/png")
            let tagged = try await Self.call(
                deployment, "/v1/users/\(uid)/photo?size=96", key: reader.secret, headers: ["If-None-Match": "\"older\""])
            #expect(tagged.body == photo.body)
            let etag = try #require(tagged.headers["etag"])
            #expect(
                try await Self.call(deployment, "/v1/users/\(uid)/photo?size=96", key: reader.secret, headers: ["If-None-Match": etag]).status == 304)

            let found = try jsonObject(try await Self.call(deployment, "/v1/users?email=OCTOCAT@github.com", key: admin.secret))
            let holds2 = (found["users"] as? [[String: Any]])?.map { $0["uid"] as? String } == [uid]
            #expect(holds2)
            let foundPhotos = (found["users"] as? [[String: Any]])?.map { ($0["profile"] as? [String: Any] ?? $0)["photoURL"] as? String }
            #expect(foundPhotos == [servicePhoto], "\(found)")
            let listed = try jsonObject(try await Self.call(deployment, "/v1/admin/users?query=octocat@github", key: admin.secret))
            let listedPhotos = (listed["users"] as? [[String: Any]])?.map { $0["photoURL"] as? String }
            #expect(listedPhotos == [servicePhoto], "\(listed)")
            #expect(try await Self.call(deployment, "/v1/users?email=octocat@github.com", key: reader.secret).status == 403)
            #expect(try await Self.call(deployment, "/v1/users?email=not-an-email", key: admin.secret).status == 400)
            #expect(try await Self.call(deployment, "/v1/users/\(uid)/disable", key: reader.secret, method: "POST").status == 403)
            #expect(try await Self.call(deployment, "/v1/users/\(uid)/disable", key: admin.secret, method: "POST").status == 204)
            // Disabling ends the user's sessions; services still read the (disabled) profile.
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me").status == 401)
            #expect(try jsonObject(try await Self.call(deployment, "/v1/users/\(uid)", key: reader.secret))["disabled"] as? Bool == true)
            #expect(try await Self.call(deployment, "/v1/users/\(uid)/enable", key: admin.secret, method: "POST").status == 204)
            var again = Browser(deployment)
            _ = try await again.signIn(login: "octocat")
            #expect(try await again.send("\(deployment.gatewayURL)/v1/me").status == 200)
            #expect(try await Self.call(deployment, "/v1/users/\(uid)/revoke-sessions", key: admin.secret, method: "POST").status == 204)
            #expect(try await again.send("\(deployment.gatewayURL)/v1/me").status == 401)
            #expect(try await Self.call(deployment, "/v1/users/nobody/enable", key: admin.secret, method: "POST").status == 404)

            // Revoked by another process (`gatehouse keys revoke`): the gateway trusts a key it
            // read for GATEHOUSE_SERVICE_KEY_CACHE_TTL (5 s) at most, then reads it again.
            #expect(try await keys.revoke(id: reader.key.id))
            deployment.clock.advance(by: 5.5)
            #expect(try await Self.call(deployment, "/v1/users/\(uid)", key: reader.secret).status == 401)
            let logs = deployment.logs.lines.joined(separator: "\n")
            #expect(!logs.contains(reader.secret) && !logs.contains(admin.secret))
        }
    }

    @Test("creating a key refuses unknown scopes and empty names")
    func validation() async throws {
        let keys = ServiceKeyService(storage: try await GatehouseSQLiteStorageForSpec.migrated())
        await #expect(throws: GatehouseError.self) { try await keys.create(name: "x", scopes: ["profile:write"]) }
        await #expect(throws: GatehouseError.self) { try await keys.create(name: " ", scopes: ["admin"]) }
        await #expect(throws: GatehouseError.self) { try await keys.create(name: "x", scopes: []) }
    }
}

/// The profile and photo caches: one upstream call for concurrent misses, reuse within the
/// lifetime, `?refresh=true` to bypass.
@Suite("Profile and photo caching")
struct ProfileCachingTests {
    @Test("20 concurrent misses → one GitHub /user call; cached answers reused; refresh=true goes upstream; photos too")
    func singleFlightAndReuse() async throws {
        try await withDeployment(profileCacheLifetime: 60) { deployment in
            var browser = Browser(deployment)
            let resultID = try await browser.signIn(login: "octocat")
            let uid = try #require((try jsonObject(try await browser.result(resultID))["user"] as? [String: Any])?["uid"] as? String)
            let key = try await ServiceKeyService(storage: try GatehouseSQLiteStorageForSpec.open(deployment.databasePath))
                .create(name: "cache-test", scopes: ["profile:read", "photo:read"])
            let before = try await deployment.emulatorStats()["GET /github-api/user"] ?? 0
            // Held back at the emulator so that every request arrives while the first is in flight.
            _ = try await deployment.control("faults", #"{"endpoint": "GET /github-api/user", "delayMs": 300, "times": 1}"#)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        try await ServiceKeyRoutesTests.call(deployment, "/v1/users/\(uid)/providers/github.com/profile", key: key.secret).status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 20))
            #expect(try await deployment.emulatorStats()["GET /github-api/user"] == before + 1)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me/providers/github.com/profile").status == 200)
            #expect(try await deployment.emulatorStats()["GET /github-api/user"] == before + 1)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me/providers/github.com/profile?refresh=true").status == 200)
            #expect(try await deployment.emulatorStats()["GET /github-api/user"] == before + 2)
            #expect(try await browser.send("\(deployment.gatewayURL)/v1/me/providers/github.com/profile?refresh=maybe").status == 400)

            for _ in 0..<3 {
                #expect(try await ServiceKeyRoutesTests.call(deployment, "/v1/users/\(uid)/photo?size=64", key: key.secret).status == 200)
            }
            #expect(try await deployment.emulatorStats()["GET /github-avatars/u/583231"] == 1)
        }
    }
}

/// GitHub's rate limit, honoured without calling GitHub until the reset.
@Suite("GitHub rate limit")
struct GitHubRateLimitTests {
    @Test("x-ratelimit-remaining: 0 → 429 with Retry-After, and no further GitHub call until x-ratelimit-reset")
    func exhaustedLimitStopsCalls() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            _ = try await browser.signIn(login: "octocat")
            // An hour away: the calls below come long before it however loaded the machine.
            let reset = Int(Date().timeIntervalSince1970) + 3600
            _ = try await deployment.control(
                "faults",
                #"{"endpoint": "GET /github-api/user", "status": 403, "headers": {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "\#(reset)"}, "body": "{\"message\":\"API rate limit exceeded\"}", "times": 1}"#
            )
            let url = "\(deployment.gatewayURL)/v1/me/providers/github.com/profile"
            let limited = try await browser.send(url)
            #expect(limited.status == 429)
            #expect(try jsonObject(limited)["code"] as? String == "upstream-rate-limited")
            let retryAfter = try #require(limited.headers["retry-after"].flatMap(Int.init))
            #expect((3300...3600).contains(retryAfter))
            let calls = try await deployment.emulatorStats()["GET /github-api/user"]
            for _ in 0..<3 {
                #expect(try await browser.send(url).status == 429)
            }
            // The fault is used up, so a call would succeed: the gateway does not make one.
            #expect(try await deployment.emulatorStats()["GET /github-api/user"] == calls)
        }
    }
}

/// The service routes for every provider, not only GitHub.
@Suite("Service routes for every provider")
struct ServiceRoutesPerProviderTests {
    @Test(
        "profile, live provider profile and photo by uid with a service key",
        arguments: [
            ("github.com", "octocat", "image/png"), ("microsoft.com", "AdeleV@contoso.example", "image/jpeg"),
            ("oidc.emulator", "olive@oidc.example", "image/png"), ("yahoo.com", "yuki@yahoo.example", "image/png"),
        ])
    func byUid(providerId: String, login: String, photoType: String) async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            let signedIn = try await browser.complete(login: login, provider: providerId)
            #expect(signedIn.status == 200)
            let uid = try #require((try jsonObject(signedIn)["user"] as? [String: Any])?["uid"] as? String)
            let key = try await ServiceKeyService(storage: try GatehouseSQLiteStorageForSpec.open(deployment.databasePath))
                .create(name: "directory", scopes: ["profile:read", "photo:read"])

            let profile = try jsonObject(try await ServiceKeyRoutesTests.call(deployment, "/v1/users/\(uid)", key: key.secret))
            #expect(profile["uid"] as? String == uid)
            let holds = (profile["providers"] as? [[String: Any]])?.map { $0["providerId"] as? String } == [providerId]
            #expect(holds)
            let live = try await ServiceKeyRoutesTests.call(deployment, "/v1/users/\(uid)/providers/\(providerId)/profile", key: key.secret)
            #expect(live.status == 200)
            #expect(try jsonObject(live)["providerId"] as? String == providerId)
            #expect(try jsonObject(live)["federatedId"] as? String != nil)
            let photo = try await ServiceKeyRoutesTests.call(deployment, "/v1/users/\(uid)/photo", key: key.secret)
            #expect(photo.status == 200)
            #expect(photo.headers["content-type"] == photoType)
            #expect(photo.body.count > 100)
        }
    }
}
