import CurlClient
import Foundation
import GatehouseCore
import GatehouseTestSupport
import Testing

/// The operators' routes under `/v1/admin/…` with service keys, end to end: search and paging,
/// sessions, unlink, delete, keys over HTTP, and what each scope allows.
@Suite("Admin routes")
struct AdminRoutesTests {
    static func call(
        _ deployment: TestDeployment, _ path: String, key: String, method: String = "GET", body: String? = nil
    ) async throws -> OutboundResponse {
        try await ProviderAPITests.call(
            deployment, path, key: key, method: method, headers: body == nil ? [:] : ["Content-Type": "application/json"],
            body: body.map { Array($0.utf8) })
    }

    static func uids(_ response: OutboundResponse) throws -> [String] {
        (try jsonObject(response)["users"] as? [[String: Any]] ?? []).compactMap { $0["uid"] as? String }
    }

    @Test(
        "users: search by email, uid, provider identity and name, wildcards and SQL taken literally; paging with a cursor covers every account once")
    func search() async throws {
        try await withDeployment { deployment in
            let key = try await ProviderAPITests.key(deployment, ["admin:users"])
            var uids: [String: String] = [:]
            for (login, provider) in [
                ("octocat", "github.com"), ("private-pat", "github.com"), ("olive@oidc.example", "oidc.emulator"),
                ("AdeleV@contoso.example", "microsoft.com"),
            ] {
                var browser = Browser(deployment)
                uids[login] = try account(try await browser.complete(login: login, provider: provider)).uid
            }
            func find(_ query: String) async throws -> [String] {
                try Self.uids(try await Self.call(deployment, "/v1/admin/users?query=\(FormEncoding.escape(query))", key: key))
            }
            #expect(try await find("octocat@github") == [uids["octocat"]!])
            #expect(try await find("OCTOCAT@GITHUB.COM") == [uids["octocat"]!], "without case")
            #expect(try await find(uids["olive@oidc.example"]!) == [uids["olive@oidc.example"]!], "by uid")
            #expect(try await find("github.com:583231") == [uids["octocat"]!], "by provider identity")
            #expect(try await find("583231") == [uids["octocat"]!], "by federated id")
            #expect(try await find("Pat Private") == [uids["private-pat"]!], "by name")
            #expect(try await Self.call(deployment, "/v1/admin/users?query=a%00b", key: key).status == 400, "NUL")
            // One character of 10,001 scalars (60 KB): the bound counts bytes, not characters.
            let combining = "a" + String(repeating: "\u{301}", count: 10_000)
            for target in ["/v1/admin/users?query=", "/v1/admin/activity?uid="] {
                let long = try await Self.call(deployment, "\(target)\(FormEncoding.escape(combining))", key: key)
                #expect(long.status == 400 && long.bodyText.contains("bytes"), "\(target): \(long.status)")
            }
            let lookup = try await Self.call(deployment, "/v1/users?email=\(FormEncoding.escape(combining + "@example.com"))", key: key)
            #expect(lookup.status == 400, "\(lookup.status)")
            for hostile in ["%", "_", "%@%", "' OR '1'='1", "\\", "octo%cat", "*", "_\u{301}"] {
                #expect(try await find(hostile).isEmpty, "\(hostile) is text, not a pattern")
            }
            // Two accounts a page: every account once, in order.
            var seen: [String] = []
            var cursor: String? = nil
            for _ in 0..<10 {
                let page = try jsonObject(
                    try await Self.call(deployment, "/v1/admin/users" + (cursor.map { "?cursor=\($0)" } ?? ""), key: key))
                seen += (page["users"] as? [[String: Any]] ?? []).compactMap { $0["uid"] as? String }
                cursor = page["nextCursor"] as? String
                if cursor == nil { break }
            }
            let holds = Set(seen) == Set(uids.values) && seen.count == 4 && seen == seen.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) })
            #expect(holds)
            // Keys without the scope learn nothing, not even whether an address exists.
            let other = try await ProviderAPITests.key(deployment, ["admin:keys", "profile:read"])
            let refused = try await Self.call(deployment, "/v1/admin/users?query=octocat%40github.com", key: other)
            let unknown = try await Self.call(deployment, "/v1/admin/users?query=nobody%40example.com", key: other)
            #expect(refused.status == 403 && unknown.status == 403 && refused.bodyText.count == unknown.bodyText.count)
        }
    }

    @Test("a key's last use is listed: null before, a time once it called a route")
    func keysCarryTheirLastUse() async throws {
        try await withDeployment { deployment in
            let admin = try await ProviderAPITests.key(deployment, ["admin:keys"])
            let reader = try await ProviderAPITests.key(deployment, ["profile:read"])
            func readerKey() async throws -> [String: Any]? {
                let keys = try jsonObject(try await Self.call(deployment, "/v1/admin/keys", key: admin))["keys"] as? [[String: Any]]
                return keys?.first { ($0["scopes"] as? [String]) == ["profile:read"] }
            }
            #expect(try await readerKey()?["lastUsedAt"] is NSNull)
            #expect(try await Self.call(deployment, "/v1/users/nobody", key: reader).status == 404)
            // Written behind the call: within moments.
            var used: Any?
            for _ in 0..<200 {
                used = try await readerKey()?["lastUsedAt"]
                if used is String { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(used is String, "\(String(describing: used))")
        }
    }

    @Test("an account's sessions carry their last use: the sign-in's client, then each refresh's time, address and user agent")
    func sessionsCarryTheirLastUse() async throws {
        try await withDeployment { deployment in
            let key = try await ProviderAPITests.key(deployment, ["admin:users"])
            var browser = Browser(deployment)
            let signedIn = try jsonObject(try await browser.complete(login: "octocat"))
            let uid = try #require((signedIn["user"] as? [String: Any])?["uid"] as? String)
            let refreshToken = try #require(signedIn["refreshToken"] as? String)
            func session() async throws -> [String: Any]? {
                (try jsonObject(try await Self.call(deployment, "/v1/admin/users/\(uid)/sessions", key: key))["sessions"] as? [[String: Any]])?.first
            }
            let first = try #require(try await session())
            #expect(first["clientAddress"] as? String == "127.0.0.1")
            #expect(first["lastUsedAt"] as? String != nil)
            deployment.clock.advance(by: 120)
            let refreshed = try await deployment.client.execute(
                OutboundRequest(
                    method: "POST", url: "\(deployment.gatewayURL)/v1/token",
                    headers: ["Content-Type": "application/x-www-form-urlencoded", "User-Agent": "ExampleApp/2.1 (iOS 19)"],
                    body: Array("grant_type=refresh_token&refresh_token=\(FormEncoding.escape(refreshToken))".utf8)))
            #expect(refreshed.status == 200)
            let after = try #require(try await session())
            #expect(after["userAgent"] as? String == "ExampleApp/2.1 (iOS 19)")
            let formatter = ISO8601DateFormatter()
            let before = try #require((first["lastUsedAt"] as? String).flatMap(formatter.date(from:)))
            let now = try #require((after["lastUsedAt"] as? String).flatMap(formatter.date(from:)))
            #expect(now.timeIntervalSince(before) >= 119, "\(before) → \(now)")
        }
    }

    @Test("an account's sessions are listed by the deployment's clock: past their lifetime they are gone")
    func sessionsFollowTheClock() async throws {
        try await withDeployment { deployment in
            let key = try await ProviderAPITests.key(deployment, ["admin:users"])
            var browser = Browser(deployment)
            let uid = try #require((try jsonObject(try await browser.complete(login: "octocat"))["user"] as? [String: Any])?["uid"] as? String)
            func listed() async throws -> Int? {
                (try jsonObject(try await Self.call(deployment, "/v1/admin/users/\(uid)/sessions", key: key))["sessions"] as? [Any])?.count
            }
            #expect(try await listed() == 1)
            deployment.clock.advance(by: 8 * 24 * 3600)
            #expect(try await listed() == 0, "a session older than its 7-day lifetime")
        }
    }

    @Test("an account with more than 100 live sessions: the newest 100 are listed, with the total, in the API and the console")
    func longSessionListSaysSo() async throws {
        try await withDeployment { deployment in
            let key = try await ProviderAPITests.key(deployment, ["admin:users"])
            var browser = Browser(deployment)
            let uid = try #require((try jsonObject(try await browser.complete(login: "octocat"))["user"] as? [String: Any])?["uid"] as? String)
            let store = try GatehouseSQLiteStorageForSpec.open(deployment.databasePath)
            let now = deployment.clock.now()
            for index in 0..<104 {
                try await store.insertSession(
                    SessionRecord(
                        idHash: SecureRandom.digest("extra-\(index)"), uid: uid, createdAt: now.addingTimeInterval(Double(-index - 60)),
                        expiresAt: now.addingTimeInterval(3600), familyId: "extra-\(index)", signInProvider: "github.com"))
            }
            let listing = try jsonObject(try await Self.call(deployment, "/v1/admin/users/\(uid)/sessions", key: key))
            let listed = try #require(listing["sessions"] as? [[String: Any]])
            #expect(listed.count == 100)
            #expect(listing["total"] as? Int == 105)
            #expect(listed.first?["id"] as? String != "extra-0", "newest first: the browser's own sign-in")
            #expect(listed.last?["id"] as? String == "extra-98")
        }
    }

    @Test(
        "sessions: listed, one revoked (its ID token stops working, the other's does not), all revoked; unlink (of a disabled account too) and delete by an operator, audited with the key"
    )
    func sessionsUnlinkDelete() async throws {
        try await withDeployment { deployment in
            let key = try await ProviderAPITests.key(deployment, ["admin:users"])
            var first = Browser(deployment)
            let one = try jsonObject(try await first.complete(login: "octocat"))
            var second = Browser(deployment)
            let two = try jsonObject(try await second.complete(login: "octocat"))
            let uid = try #require((one["user"] as? [String: Any])?["uid"] as? String)
            let listing = try jsonObject(try await Self.call(deployment, "/v1/admin/users/\(uid)/sessions", key: key))
            let listed = listing["sessions"] as? [[String: Any]]
            #expect(listed?.count == 2)
            #expect(listing["total"] as? Int == 2)
            let holds = listed?.allSatisfy { $0["signInProvider"] as? String == "github.com" } == true
            #expect(holds)
            let firstToken = try #require(one["idToken"] as? String)
            let secondToken = try #require(two["idToken"] as? String)
            let sid = try #require(try HookTests.claims(firstToken)["sid"] as? String)
            #expect(try await Self.call(deployment, "/v1/admin/users/\(uid)/sessions/\(sid)", key: key, method: "DELETE").status == 204)
            #expect(try await GatewayTokenTests.bearer(deployment, firstToken).status == 401)
            #expect(try await GatewayTokenTests.bearer(deployment, secondToken).status == 200)
            #expect(try await Self.call(deployment, "/v1/admin/users/\(uid)/sessions/\(sid)", key: key, method: "DELETE").status == 404)
            #expect(try await Self.call(deployment, "/v1/admin/users/\(uid)/sessions", key: key, method: "DELETE").status == 204)
            #expect(try await GatewayTokenTests.bearer(deployment, secondToken).status == 401)

            // Another account's session cannot be revoked through this account's path.
            var pat = Browser(deployment)
            let patAnswer = try jsonObject(try await pat.complete(login: "private-pat"))
            let patToken = try #require(patAnswer["idToken"] as? String)
            let patSid = try #require(try HookTests.claims(patToken)["sid"] as? String)
            #expect(try await Self.call(deployment, "/v1/admin/users/\(uid)/sessions/\(patSid)", key: key, method: "DELETE").status == 404)

            var linker = Browser(deployment)
            #expect(try await linker.complete(login: "octocat").status == 200)
            #expect(try await linker.complete(login: "AdeleV@contoso.example", provider: "microsoft.com", mode: "link").status == 200)
            // An operator removes an identity from a disabled account (one an attacker linked,
            // say) without enabling it first, which would let that identity sign in meanwhile.
            #expect(try await Self.call(deployment, "/v1/users/\(uid)/disable", key: key, method: "POST").status == 204)
            let unlinked = try await Self.call(deployment, "/v1/admin/users/\(uid)/providers/microsoft.com", key: key, method: "DELETE")
            #expect(unlinked.status == 200, "\(unlinked.bodyText)")
            #expect(try account(unlinked).providers == ["github.com"])
            #expect(try await Self.call(deployment, "/v1/admin/users/\(uid)/providers/github.com", key: key, method: "DELETE").status == 400)
            #expect(try await Self.call(deployment, "/v1/admin/users/\(uid)", key: key, method: "DELETE").status == 204)
            #expect(try await Self.call(deployment, "/v1/admin/users/\(uid)", key: key, method: "DELETE").status == 404)
            #expect(try await deployment.accountCount() == 1)
            let lines = deployment.logs.lines.filter { $0.contains("\"audit\":true") }
            for event in ["session.revoked", "account.sessions-revoked", "provider.unlinked", "account.deleted"] {
                let holds2 = lines.contains { $0.contains(event) && $0.contains("service-key:sk_") }
                #expect(holds2, "\(event) names the operator's key")
            }
        }
    }

    @Test("service keys over HTTP: created with its secret shown once, listed without it, the new key works, revoked; admin:keys only")
    func keys() async throws {
        try await withDeployment { deployment in
            let key = try await ProviderAPITests.key(deployment, ["admin:keys", "profile:read"])
            let created = try await Self.call(
                deployment, "/v1/admin/keys", key: key, method: "POST", body: #"{"name":"billing","scopes":["profile:read"]}"#)
            #expect(created.status == 201, "\(created.bodyText)")
            #expect(created.headers["cache-control"] == "no-store")
            let object = try jsonObject(created)
            let secret = try #require(object["secret"] as? String)
            let id = try #require((object["key"] as? [String: Any])?["id"] as? String)
            #expect(secret.hasPrefix("ghsk_"))
            let listed = try await Self.call(deployment, "/v1/admin/keys", key: key)
            #expect(listed.status == 200)
            #expect(!listed.bodyText.contains(secret) && listed.bodyText.contains(id))
            #expect(try await Self.call(deployment, "/v1/users/nobody", key: secret).status == 404, "the new key works")
            // No escalation: a key hands out, and takes back, only what it holds itself.
            let stronger = try await Self.call(
                deployment, "/v1/admin/keys", key: key, method: "POST", body: #"{"name":"x","scopes":["tokens:github.com"]}"#)
            #expect(stronger.status == 403, "\(stronger.bodyText)")
            #expect(
                try await Self.call(deployment, "/v1/admin/keys", key: key, method: "POST", body: #"{"name":"x","scopes":["admin"]}"#).status == 403)
            let vault = try await ProviderAPITests.key(deployment, ["tokens:github.com"])
            let listedKeys = try #require(try jsonObject(try await Self.call(deployment, "/v1/admin/keys", key: key))["keys"] as? [[String: Any]])
            let foundVaultId = listedKeys.first { ($0["scopes"] as? [String]) == ["tokens:github.com"] }?["id"] as? String
            let vaultId = try #require(foundVaultId)
            #expect(try await Self.call(deployment, "/v1/admin/keys/\(vaultId)", key: key, method: "DELETE").status == 403)
            #expect(try await Self.call(deployment, "/v1/users/nobody", key: vault).status == 403, "still active: a token-vault key only")
            let badScopes = try await Self.call(deployment, "/v1/admin/keys", key: key, method: "POST", body: #"{"name":"x","scopes":["root"]}"#)
            #expect(badScopes.status == 403)
            // A name is plain text (`keys list` prints it to a terminal): no control, format or bidirectional character.
            for name in [#"x\r\u001b[2K"#, #"x\ty"#, #"x\u202ey"#, #"x\u200by"#] {
                let refused = try await Self.call(
                    deployment, "/v1/admin/keys", key: key, method: "POST", body: #"{"name":"\#(name)","scopes":["profile:read"]}"#)
                let code = try jsonObject(refused)["code"] as? String
                #expect(refused.status == 400 && code == "invalid-argument", "\(name)")
            }
            #expect(try await Self.call(deployment, "/v1/admin/keys/\(id)", key: key, method: "DELETE").status == 204)
            #expect(try await Self.call(deployment, "/v1/users/nobody", key: secret).status == 401, "revoked")
            #expect(try await Self.call(deployment, "/v1/admin/keys/\(id)", key: key, method: "DELETE").status == 404)
            let users = try await ProviderAPITests.key(deployment, ["admin:users"])
            #expect(try await Self.call(deployment, "/v1/admin/keys", key: users).status == 403)
            let admin = try await ProviderAPITests.key(deployment, ["admin"])
            #expect(try await Self.call(deployment, "/v1/admin/keys", key: admin).status == 200, "admin covers admin:keys")
            let holds = deployment.logs.lines.contains { $0.contains("service-key.created") && $0.contains("service-key:sk_") }
            #expect(holds)

            // The stored trail lists key administration to keys that administer keys: not to
            // one holding admin:users alone.
            // Stored behind the requests, in batches: wait for the revocation, the last of them.
            var keyEvents: [[String: Any]] = []
            for _ in 0..<200 where keyEvents.isEmpty {
                let page = try await Self.call(deployment, "/v1/admin/activity?type=service-key.revoked", key: admin)
                keyEvents = try jsonObject(page)["events"] as? [[String: Any]] ?? []
                if keyEvents.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(!keyEvents.isEmpty)
            let narrow = try await Self.call(deployment, "/v1/admin/activity?type=service-key.created", key: users)
            try #expect(narrow.status == 403 && (try jsonObject(narrow)["code"] as? String) == "permission-denied", "\(narrow.bodyText)")
            let usersView = try jsonObject(try await Self.call(deployment, "/v1/admin/activity", key: users))["events"] as? [[String: Any]] ?? []
            let types = Set(usersView.compactMap { $0["event"] as? String })
            #expect(types.isDisjoint(with: ["service-key.created", "service-key.revoked"]), "\(types)")
            let everything = try jsonObject(try await Self.call(deployment, "/v1/admin/activity", key: admin))["events"] as? [[String: Any]] ?? []
            let revokedListed = everything.contains { $0["event"] as? String == "service-key.revoked" }
            #expect(revokedListed)
        }
    }
}
