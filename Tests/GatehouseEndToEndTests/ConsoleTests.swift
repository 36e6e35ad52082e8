import CurlClient
import Foundation
import GatehouseCore
import GatehouseSQLite
import GatehouseTestSupport
import Testing

/// The operators' console at `/admin/` end to end: a browser signed in through the emulator,
/// the console's own `SameSite=Strict` cookie, the pages and the changes they make, and what
/// it refuses (a signed-out browser, a non-operator, a foreign `Origin`, a stale sign-in).
@Suite("Operators' console")
struct ConsoleTests {
    /// A deployment with the console on and octocat (by its verified email) as operator.
    static func withConsole<T>(_ body: (TestDeployment) async throws -> T) async throws -> T {
        try await withDeployment(gateway: { $0.console = ConsoleConfiguration(operators: ["octocat@github.com"]) }, body)
    }

    /// A browser signed in as octocat with the console open, and octocat's uid.
    static func signedInOperator(_ deployment: TestDeployment) async throws -> (Browser, String) {
        var browser = Browser(deployment)
        let signedIn = try jsonObject(try await browser.complete(login: "octocat"))
        let uid = try #require((signedIn["user"] as? [String: Any])?["uid"] as? String)
        browser.origin = deployment.gatewayURL
        let opened = try await browser.send("\(deployment.gatewayURL)/admin/session", method: "POST")
        #expect(opened.status == 303 && opened.headers["location"] == "/admin/users", "the console did not open")
        return (browser, uid)
    }

    /// A browser signed in as `login`, its console opened (the `SameSite=Strict` cookie set).
    static func operatorBrowser(_ deployment: TestDeployment, login: String = "octocat") async throws -> (Browser, OutboundResponse) {
        var browser = Browser(deployment)
        #expect(try await browser.complete(login: login).status == 200)
        browser.origin = deployment.gatewayURL
        let opened = try await browser.send("\(deployment.gatewayURL)/admin/session", method: "POST")
        #expect(opened.status != 303 || opened.headers["location"] == "/admin/users", "the console did not open")
        return (browser, opened)
    }

    @Test("off by default: /admin/ is not served")
    func offByDefault() async throws {
        try await withDeployment { deployment in
            let answer = try await deployment.client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/admin/"))
            #expect(answer.status == 404)
        }
    }

    @Test(
        "an operator opens the console: Strict cookie, CSP without script, the users page lists and finds accounts, the user page shows providers, claims and sessions"
    )
    func operatorPages() async throws {
        try await Self.withConsole { deployment in
            var other = Browser(deployment)
            #expect(try await other.complete(login: "private-pat").status == 200)
            let entry = try await deployment.client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/admin/"))
            #expect(entry.status == 200 && entry.bodyText.contains("Sign in with github.com"))
            var (browser, opened) = try await Self.operatorBrowser(deployment)
            #expect(opened.status == 303 && opened.headers["location"] == "/admin/users")
            let foundCookie = opened.headers.values("set-cookie").first { $0.hasPrefix("gatehouse-console=") }
            let cookie = try #require(foundCookie)
            #expect(cookie.contains("SameSite=Strict") && cookie.contains("HttpOnly"))

            let users = try await browser.send("\(deployment.gatewayURL)/admin/users")
            #expect(users.status == 200)
            let csp = try #require(users.headers["content-security-policy"])
            #expect(csp.contains("frame-ancestors 'none'") && !csp.contains("script-src") && csp.contains("default-src 'none'"))
            #expect(users.headers["cache-control"] == "no-store")
            #expect(users.bodyText.contains("The Octocat") && users.bodyText.contains("Pat Private"))
            let found = try await browser.send("\(deployment.gatewayURL)/admin/users?query=Pat%20Private")
            #expect(found.bodyText.contains("Pat Private") && !found.bodyText.contains("The Octocat"), "\(found.bodyText.suffix(1500))")
            // Markup from a search is text on the page.
            let hostile = try await browser.send("\(deployment.gatewayURL)/admin/users?query=%3Cscript%3Ex%3C%2Fscript%3E")
            #expect(hostile.status == 200 && !hostile.bodyText.contains("<script>x</script>") && hostile.bodyText.contains("&lt;script&gt;"))

            let uid = try #require(Self.firstUserLink(found.bodyText))
            let page = try await browser.send("\(deployment.gatewayURL)/admin/users/\(uid)")
            #expect(page.status == 200)
            #expect(page.bodyText.contains("github.com") && page.bodyText.contains("Revoke every session") && page.bodyText.contains(uid))
        }
    }

    @Test(
        "an address in GATEHOUSE_ADMINS names an operator only while it names one account: an account that shared it from before one account per verified email makes neither an operator"
    )
    func sharedOperatorAddressAdmitsNobody() async throws {
        try await Self.withConsole { deployment in
            var (browser, opened) = try await Self.operatorBrowser(deployment)
            #expect(opened.status == 303)
            let uid = try #require(try jsonObject(try await browser.send("\(deployment.gatewayURL)/v1/me"))["uid"] as? String)
            #expect(try await browser.send("\(deployment.gatewayURL)/admin/users").status == 200)
            // Another account's link holds the same verified address, as the store may keep from
            // before the rule (written here without it).
            let store = try GatehouseSQLiteStorageForSpec.open(deployment.databasePath)
            let own = try #require(try await store.links(uid: uid).first)
            let now = deployment.clock.now()
            var twin = own
            twin.uid = "legacy-twin"
            twin.providerId = "oidc.emulator"
            twin.federatedId = "legacy-twin"
            try await store.createAccount(
                AccountRecord(uid: "legacy-twin", createdAt: now, lastSignInAt: now), firstLink: twin, exclusiveEmail: false)
            #expect(twin.verifiedEmail == "octocat@github.com")
            let refused = try await browser.send("\(deployment.gatewayURL)/admin/users")
            #expect(refused.status == 403 && refused.bodyText.contains("Not an operator"), "\(refused.status)")
            // Once the address names one account again, that account is the operator again.
            #expect(try await store.deleteAccount(uid: "legacy-twin") != nil)
            #expect(try await browser.send("\(deployment.gatewayURL)/admin/users").status == 200)
        }
    }

    @Test("an account with more than 100 live sessions: the user page lists the newest 100 and says how many there are")
    func longSessionListSaysSo() async throws {
        try await Self.withConsole { deployment in
            var pat = Browser(deployment)
            let uid = try #require((try jsonObject(try await pat.complete(login: "private-pat"))["user"] as? [String: Any])?["uid"] as? String)
            var (browser, _) = try await Self.operatorBrowser(deployment)
            let short = try await browser.send("\(deployment.gatewayURL)/admin/users/\(uid)")
            #expect(short.status == 200 && !short.bodyText.contains("sessions-not-shown"))
            let store = try GatehouseSQLiteStorageForSpec.open(deployment.databasePath)
            for index in 0..<104 {
                try await store.insertSession(
                    SessionRecord(
                        idHash: SecureRandom.digest("extra-\(index)"), uid: uid, createdAt: deployment.clock.now().addingTimeInterval(-60),
                        expiresAt: deployment.clock.now().addingTimeInterval(3600), familyId: "extra-\(index)", signInProvider: "github.com"))
            }
            let long = try await browser.send("\(deployment.gatewayURL)/admin/users/\(uid)")
            #expect(long.status == 200)
            #expect(long.bodyText.contains("The newest 100 of 105 live sessions."))
            #expect(long.bodyText.components(separatedBy: "id=\"revoke-").count - 1 == 100)
        }
    }

    /// Follows a sign-in link of a console page as the browser would (`GATEHOUSE_REQUIRE_RESULT_BINDING`
    /// is on, as by default), approving at the emulator as `login`: the callback's answer. The
    /// navigation names the console as its `Referer`, as the page's `Referrer-Policy: same-origin` lets it.
    static func follow(_ page: OutboundResponse, link text: String, login: String, with browser: inout Browser) async throws -> OutboundResponse {
        let pattern = try Regex(#"<a href="([^"]*)">"# + text)
        let href = try #require(page.bodyText.firstMatch(of: pattern)?.output[1].substring, "\(page.bodyText)")
        let gateway = browser.deployment.gatewayURL
        let start = try await browser.send(
            gateway + href.replacingOccurrences(of: "&amp;", with: "&") + "&login=\(login)", headers: ["Referer": "\(gateway)/admin"])
        #expect(start.status == 302, "\(href): \(start.bodyText)")
        let approved = try await browser.deployment.client.execute(OutboundRequest(url: try #require(start.headers["location"])))
        return try await browser.send(try #require(approved.headers["location"]))
    }

    @Test(
        "the console's own sign-in links work with result binding required: the entry page's, and \"Sign in again\" on a stale sign-in, whose fresh sign-in then makes the change"
    )
    func signInLinks() async throws {
        try await Self.withConsole { deployment in
            var browser = Browser(deployment)
            browser.origin = deployment.gatewayURL
            let entry = try await browser.send("\(deployment.gatewayURL)/admin/")
            let callback = try await Self.follow(entry, link: "Sign in with github.com", login: "octocat", with: &browser)
            #expect(
                callback.status == 303 && callback.headers["location"]?.hasPrefix("\(deployment.gatewayURL)/admin/") == true, "\(callback.bodyText)")
            #expect(try await browser.send("\(deployment.gatewayURL)/admin/session", method: "POST").status == 303)
            #expect(try await browser.send("\(deployment.gatewayURL)/admin/users").status == 200)

            var other = Browser(deployment)
            let pat = try jsonObject(try await other.complete(login: "private-pat"))
            let uid = try #require((pat["user"] as? [String: Any])?["uid"] as? String)
            deployment.clock.advance(by: 301)
            let stale = try await browser.send("\(deployment.gatewayURL)/admin/users/\(uid)/disable", method: "POST")
            #expect(stale.bodyText.contains("requires-recent-login"))
            let again = try await Self.follow(stale, link: "Sign in again with github.com", login: "octocat", with: &browser)
            #expect(again.status == 303 && again.headers["location"]?.hasPrefix("\(deployment.gatewayURL)/admin/") == true, "\(again.bodyText)")
            #expect(try await browser.send("\(deployment.gatewayURL)/admin/session", method: "POST").status == 303)
            #expect(try await browser.send("\(deployment.gatewayURL)/admin/users/\(uid)/disable", method: "POST").status == 303)
        }
    }

    @Test(
        "a sign-in older than the recent-login window does not open the console (a session left signed in on a shared machine): the entry page offers re-authentication, which does"
    )
    func staleSignInDoesNotOpenTheConsole() async throws {
        try await Self.withConsole { deployment in
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
            browser.origin = deployment.gatewayURL
            deployment.clock.advance(by: 301)
            let refused = try await browser.send("\(deployment.gatewayURL)/admin/session", method: "POST")
            #expect(refused.status == 303 && refused.headers["location"] == "/admin/", "\(refused.status)")
            let cookieSet = refused.headers.values("set-cookie").contains { $0.hasPrefix("gatehouse-console=") }
            #expect(!cookieSet)
            let entry = try await browser.send("\(deployment.gatewayURL)/admin/")
            #expect(entry.bodyText.contains("within 5 minutes of a sign-in") && !entry.bodyText.contains("id=\"open-console\""), "\(entry.bodyText)")
            let again = try await Self.follow(entry, link: "Sign in again with github.com", login: "octocat", with: &browser)
            #expect(again.status == 303, "\(again.bodyText)")
            let opened = try await browser.send("\(deployment.gatewayURL)/admin/session", method: "POST")
            #expect(opened.status == 303 && opened.headers["location"] == "/admin/users")
            #expect(try await browser.send("\(deployment.gatewayURL)/admin/users").status == 200)
        }
    }

    @Test(
        "changes: disable, claims, a session revoked, delete with a typed confirmation — each audited as operator:<uid>; a stale sign-in is asked to sign in again; a foreign Origin is refused"
    )
    func operatorChanges() async throws {
        try await Self.withConsole { deployment in
            let key = try await ProviderAPITests.key(deployment, ["admin", "profile:read"])
            var other = Browser(deployment)
            let pat = try jsonObject(try await other.complete(login: "private-pat"))
            let uid = try #require((pat["user"] as? [String: Any])?["uid"] as? String)
            var (browser, _) = try await Self.operatorBrowser(deployment)
            let base = "\(deployment.gatewayURL)/admin/users/\(uid)"
            let form: OutboundHeaders = ["Content-Type": "application/x-www-form-urlencoded"]

            let claims = try await browser.send(
                "\(base)/claims", method: "POST", headers: form, body: Array("claims=%7B%22plan%22%3A%22pro%22%7D".utf8))
            #expect(claims.status == 303)
            #expect(try await Self.user(deployment, uid, key: key)?["customClaims"] as? [String: String] == ["plan": "pro"])
            let page = try await browser.send("\(base)")
            #expect(page.bodyText.contains("&quot;plan&quot;"))
            let notice = try await browser.send("\(deployment.gatewayURL)\(try #require(claims.headers["location"]))")
            #expect(notice.bodyText.contains("The custom claims are saved"))

            // Another site's form riding on the cookies: refused, nothing changed.
            var foreign = browser
            foreign.origin = "https://evil.example"
            let refused = try await foreign.send("\(base)/disable", method: "POST")
            #expect(refused.status == 403 && refused.bodyText.contains("origin-not-allowed"), "\(refused.status) \(refused.headers)")
            #expect(try await Self.user(deployment, uid, key: key)?["disabled"] as? Bool == false)

            let sid = try #require(try await Self.sessions(deployment, uid, key: key).first)
            #expect(try await browser.send("\(base)/sessions/\(sid)/revoke", method: "POST").status == 303)
            #expect(try await Self.sessions(deployment, uid, key: key).isEmpty)

            #expect(try await browser.send("\(base)/disable", method: "POST").status == 303)
            #expect(try await Self.user(deployment, uid, key: key)?["disabled"] as? Bool == true)

            let unconfirmed = try await browser.send("\(base)/delete", method: "POST", headers: form, body: Array("confirm=nope".utf8))
            #expect(unconfirmed.status == 400)

            // Past the re-authentication window (300 s): destructive changes wait for a new sign-in.
            deployment.clock.advance(by: 301)
            let stale = try await browser.send("\(base)/delete", method: "POST", headers: form, body: Array("confirm=\(uid)".utf8))
            #expect(stale.status == 401 || stale.status == 403, "\(stale.status) \(stale.headers) \(stale.bodyText.prefix(800))")
            #expect(stale.bodyText.contains("requires-recent-login") && stale.bodyText.contains("mode=reauthenticate"))
            #expect(try await Self.user(deployment, uid, key: key) != nil)

            let (fresh, operatorUid) = try await Self.signedInOperator(deployment)
            var again = fresh
            let deleted = try await again.send("\(base)/delete", method: "POST", headers: form, body: Array("confirm=\(uid)".utf8))
            #expect(deleted.status == 303)
            #expect(try await Self.user(deployment, uid, key: key) == nil)

            // The stored trail: the activity listing (API and page) has the same events within seconds.
            var stored: [[String: Any]] = []
            for _ in 0..<200 {
                let answer = try await ProviderAPITests.call(deployment, "/v1/admin/activity?uid=\(uid)", key: key)
                stored = try jsonObject(answer)["events"] as? [[String: Any]] ?? []
                if stored.contains(where: { $0["event"] as? String == "account.deleted" }) { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            let holds =
                stored.compactMap { $0["event"] as? String }.prefix(4) == [
                    "account.deleted", "account.disabled", "session.revoked", "account.claims-updated",
                ]
            #expect(holds, "\(stored)")
            #expect(stored.first?["actor"] as? String == "operator:\(operatorUid)")
            let disabledOnly = try jsonObject(
                try await ProviderAPITests.call(deployment, "/v1/admin/activity?uid=\(uid)&type=account.disabled", key: key))
            #expect((disabledOnly["events"] as? [[String: Any]])?.count == 1)
            var viewer = fresh
            let activity = try await viewer.send("\(deployment.gatewayURL)/admin/activity?uid=\(uid)")
            #expect(activity.status == 200 && activity.bodyText.contains("account.deleted") && activity.bodyText.contains("operator:\(operatorUid)"))
            #expect(try await ProviderAPITests.call(deployment, "/v1/admin/activity?cursor=abc", key: key).status == 400)
            // Every cursor the OpenAPI pattern allows is a position: below event 0 is an empty last page.
            for cursor in ["0", "999999999999999999"] {
                let page = try await ProviderAPITests.call(deployment, "/v1/admin/activity?cursor=\(cursor)", key: key)
                #expect(page.status == 200, "cursor \(cursor)")
                if cursor == "0" { #expect((try jsonObject(page)["events"] as? [Any])?.isEmpty == true) }
            }

            let audited = AuditTrailTests.auditLines(deployment.logs.lines).filter { $0["audit.actor"] as? String == "operator:\(operatorUid)" }
            let holds2 = Set(audited.compactMap { $0["audit.event"] as? String }).isSuperset(of: [
                "account.claims-updated", "session.revoked", "account.disabled", "account.deleted", "console.opened",
            ])
            #expect(holds2, "\(audited)")
        }
    }

    @Test(
        "who may not: a signed-out browser gets the entry page, a non-operator 403 with nothing about any account, a POST without the console cookie changes nothing"
    )
    func refusals() async throws {
        try await Self.withConsole { deployment in
            let key = try await ProviderAPITests.key(deployment, ["admin", "profile:read"])
            var octocat = Browser(deployment)
            let signedIn = try jsonObject(try await octocat.complete(login: "octocat"))
            let uid = try #require((signedIn["user"] as? [String: Any])?["uid"] as? String)

            let anonymous = try await deployment.client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/admin/users"))
            #expect(anonymous.status == 200 && anonymous.bodyText.contains("Sign in with") && !anonymous.bodyText.contains("The Octocat"))

            let (outsider, opened) = try await Self.operatorBrowser(deployment, login: "private-pat")
            #expect(
                opened.status == 403 && opened.bodyText.contains("Not an operator"),
                "\(opened.status) \(opened.headers) \(opened.bodyText.prefix(600))")
            // With a stable code, as every other refusal of the console's.
            #expect(opened.bodyText.contains("<code>permission-denied</code>"), "\(opened.bodyText.prefix(600))")
            let holds = !opened.headers.values("set-cookie").contains { $0.hasPrefix("gatehouse-console=") }
            #expect(holds)
            // Every page and route answers a signed-in non-operator the same 403: whether an
            // account or an address exists cannot be told from it.
            var copied = outsider
            var bodies = Set<String>()
            for (method, path) in Self.everyRoute(uid: uid) + [
                ("GET", "/admin/users?query=octocat%40github.com"), ("GET", "/admin/users?query=nobody%40nowhere.example"),
                ("GET", "/admin/users/no-such-uid"),
            ] {
                let answer = try await copied.send("\(deployment.gatewayURL)\(path)", method: method)
                #expect(answer.status == 403, "\(method) \(path): \(answer.status)")
                bodies.insert(answer.bodyText)
            }
            #expect(bodies.count == 1, "one and the same refusal")
            #expect(!(bodies.first ?? "").contains("The Octocat") && !(bodies.first ?? "").contains(uid))

            // The session cookie alone (SameSite=Lax, what a cross-site form could carry) opens nothing.
            var laxOnly = octocat
            laxOnly.origin = deployment.gatewayURL
            let disable = try await laxOnly.send("\(deployment.gatewayURL)/admin/users/\(uid)/disable", method: "POST")
            #expect(disable.status == 303 && disable.headers["location"] == "/admin/")
            #expect(try await Self.user(deployment, uid, key: key)?["disabled"] as? Bool == false)
        }
    }

    @Test("a user's page shows each grant's state: working, expired but refreshable, then refused by the provider (re-consent needed)")
    func grantStates() async throws {
        try await Self.withConsole { deployment in
            var adele = Browser(deployment)
            let signedIn = try await MicrosoftSignInTests.signIn(&adele, MicrosoftSignInTests.adele)
            #expect(signedIn.status == 200)
            let uid = try #require((signedIn.json["user"] as? [String: Any])?["uid"] as? String)
            var browser = try await Self.operatorBrowser(deployment).0
            func grant() async throws -> String {
                let page = try await browser.send("\(deployment.gatewayURL)/admin/users/\(uid)")
                let range = try #require(page.bodyText.range(of: #"<td class="grant">[^<]*</td>"#, options: .regularExpression), "\(page.bodyText)")
                return String(page.bodyText[range].dropFirst(#"<td class="grant">"#.count).dropLast("</td>".count))
            }
            #expect(try await grant() == "working")
            // Past the access token's hour: the stored refresh token renews it at the next use.
            deployment.clock.advance(by: 2 * 3600)
            #expect(try await grant() == "expired, refreshed at the next use")
            // The provider refuses the refresh: the grant is dead until Adele signs in again.
            _ = try await deployment.control("expire-tokens", "{}")
            _ = try await deployment.control("microsoft/revoke-refresh-tokens", "{}")
            #expect(try await adele.send("\(deployment.gatewayURL)/v1/me/providers/microsoft.com/profile?refresh=true").status == 409)
            #expect(try await grant() == "refresh refused: the user must sign in with it again")
        }
    }

    @Test("service keys: created with the secret shown once (no-store), listed without it, revoked; webhooks page lists endpoints")
    func keysAndWebhooks() async throws {
        try await withDeployment(
            gateway: { $0.console = ConsoleConfiguration(operators: ["octocat@github.com"]) }, webhooks: WebhookTests.sampleApp()
        ) { deployment in
            var (browser, _) = try await Self.operatorBrowser(deployment)
            let created = try await browser.send(
                "\(deployment.gatewayURL)/admin/keys", method: "POST", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Array("name=billing&scope=profile%3Aread&scope=photo%3Aread".utf8))
            #expect(created.status == 201 && created.headers["cache-control"] == "no-store")
            let foundSecret = created.bodyText.range(of: #"ghsk_[A-Za-z0-9_-]+"#, options: .regularExpression).map { String(created.bodyText[$0]) }
            let secret = try #require(foundSecret)
            let listed = try await browser.send("\(deployment.gatewayURL)/admin/keys")
            #expect(listed.bodyText.contains("billing") && !listed.bodyText.contains(secret))
            // The new key works, with the scopes ticked.
            let admin = try await ProviderAPITests.key(deployment, ["admin"])
            let keys = try jsonObject(try await ProviderAPITests.call(deployment, "/v1/admin/keys", key: admin))["keys"] as? [[String: Any]] ?? []
            let foundBilling = keys.first { $0["name"] as? String == "billing" }
            let billing = try #require(foundBilling)
            #expect((billing["scopes"] as? [String])?.sorted() == ["photo:read", "profile:read"])
            let id = try #require(billing["id"] as? String)
            #expect(try await ProviderAPITests.call(deployment, "/v1/users/nobody", key: secret).status == 404)
            #expect(try await browser.send("\(deployment.gatewayURL)/admin/keys/\(id)/revoke", method: "POST").status == 303)
            #expect(try await ProviderAPITests.call(deployment, "/v1/users/nobody", key: secret).status == 401)
            // The key's events belong to no account: their rows link none (a row's missing value
            // is not taken from the page's own).
            var activity = ""
            for _ in 0..<200 where !activity.contains("<td>service-key.revoked</td>") {
                try await Task.sleep(for: .milliseconds(50))
                activity = try await browser.send("\(deployment.gatewayURL)/admin/activity?type=service-key.revoked").bodyText
            }
            #expect(activity.contains("<td>service-key.revoked</td>") && activity.contains(id), "\(activity)")
            #expect(!activity.contains(#"href="/admin/users/""#), "\(activity)")

            let webhooks = try await browser.send("\(deployment.gatewayURL)/admin/webhooks")
            #expect(webhooks.status == 200 && webhooks.bodyText.contains("sample-app") && webhooks.bodyText.contains("Waiting for delivery"))
            // The receiver's origin only: a receiver's path or query may hold its token.
            #expect(webhooks.bodyText.contains("<code>\(deployment.emulatorURL)/…</code>"), "\(webhooks.bodyText)")
            #expect(!webhooks.bodyText.contains("/sample-app/webhooks"), "\(webhooks.bodyText)")
        }
    }

    @Test("the webhooks page pages each list of deliveries: past the first hundred, a link leads to the rest, keeping the other list's place")
    func deliveryListsPage() async throws {
        try await withDeployment(
            gateway: { $0.console = ConsoleConfiguration(operators: ["octocat@github.com"]) }, webhooks: WebhookTests.sampleApp()
        ) { deployment in
            var (browser, _) = try await Self.operatorBrowser(deployment)
            var other = Browser(deployment)
            let uid = try account(try await other.complete(login: "private-pat")).uid
            // 130 deliveries for an endpoint no instance is configured with any more: they stay
            // pending, written with the change they describe.
            let storage = try SQLiteStorage(path: deployment.databasePath)
            let entries = (0..<130).map { index in
                OutboxEntry(
                    eventId: "evt_paged\(1000 + index)", endpoint: "retired-app", type: "account.disabled",
                    payload: Data(#"{"type":"account.disabled","id":"evt_paged\#(1000 + index)","data":{}}"#.utf8),
                    createdAt: deployment.clock.now())
            }
            let disabled = try await Outbox.$entries.withValue(entries) { try await storage.setDisabled(uid: uid, disabled: true) }
            #expect(disabled == .changed)
            func shown(_ page: String) -> Set<String> {
                Set(page.matches(of: /evt_paged\d+/).map { String($0.output) })
            }
            let first = try await browser.send("\(deployment.gatewayURL)/admin/webhooks")
            #expect(first.status == 200)
            let firstShown = shown(first.bodyText)
            #expect(firstShown.count == 100, "\(first.bodyText)")
            let foundLink = first.bodyText.firstMatch(of: /<a id="next-pending" href="([^"]+)"/).map { String($0.output.1) }
            let link = try #require(foundLink, "\(first.bodyText)")
            #expect(link.hasPrefix("/admin/webhooks?pending=evt_paged") && !link.contains("failed"), "\(link)")
            let second = try await browser.send("\(deployment.gatewayURL)\(link.replacingOccurrences(of: "&amp;", with: "&"))")
            #expect(second.status == 200)
            let secondShown = shown(second.bodyText)
            #expect(secondShown.count == 30 && secondShown.isDisjoint(with: firstShown), "\(second.bodyText)")
            #expect(!second.bodyText.contains("id=\"next-pending\""), "\(second.bodyText)")
            #expect(second.bodyText.contains(#"<a id="first-pending" href="/admin/webhooks">"#), "a way back to the first page: \(second.bodyText)")
            // The failed list's place (past every failed delivery here) is kept in the pending
            // list's links, and the other way round.
            let placed = try await browser.send("\(deployment.gatewayURL)/admin/webhooks?failed=zzz")
            #expect(shown(placed.bodyText) == firstShown)
            #expect(placed.bodyText.contains(#"id="first-failed" href="/admin/webhooks">"#), "\(placed.bodyText)")
            let placedLink = placed.bodyText.firstMatch(of: /<a id="next-pending" href="([^"]+)"/).map { String($0.output.1) }
            #expect(placedLink?.hasSuffix("&amp;failed=zzz") == true, "\(String(describing: placedLink))")
            // A cursor is checked like the API's.
            let long = try await browser.send("\(deployment.gatewayURL)/admin/webhooks?pending=\(String(repeating: "a", count: 300))")
            #expect(long.status == 400, "\(long.bodyText)")
        }
    }

    @Test(
        "a public URL written with its scheme in capitals still names the origin browsers send: console writes from the console's pages are accepted"
    )
    func ownOriginAsBrowsersSendIt() async throws {
        try await withDeployment(gateway: { configuration in
            configuration.console = ConsoleConfiguration(operators: ["octocat@github.com"])
            configuration.publicURL = configuration.publicURL.replacingOccurrences(of: "http://", with: "HTTP://")
        }) { deployment in
            var browser = Browser(deployment)
            browser.origin = deployment.gatewayURL
            let signedOut = try await browser.send("\(deployment.gatewayURL)/admin/sign-out", method: "POST")
            #expect(signedOut.status == 303 && signedOut.headers["location"] == "/admin/", "\(signedOut.status) \(signedOut.bodyText.prefix(300))")
            let cleared = signedOut.headers.values("set-cookie").contains { $0.hasPrefix("gatehouse-console=;") }
            #expect(cleared)
        }
    }

    @Test("a user's photo in the console keeps the photo's sandbox and is never stored: the console runs on shared machines")
    func consolePhotoIsSandboxedAndNotStored() async throws {
        try await Self.withConsole { deployment in
            var (browser, uid) = try await Self.signedInOperator(deployment)
            let photo = try await browser.send("\(deployment.gatewayURL)/admin/users/\(uid)/photo")
            #expect(photo.status == 200 && photo.headers["content-type"]?.hasPrefix("image/") == true, "\(photo.status)")
            #expect(photo.headers["content-security-policy"] == "default-src 'none'; sandbox", "\(photo.headers)")
            #expect(photo.headers["cache-control"] == "no-store", "\(photo.headers)")
            // The pages keep theirs.
            let page = try await browser.send("\(deployment.gatewayURL)/admin/users/\(uid)")
            #expect(page.headers["content-security-policy"]?.contains("form-action 'self'") == true)
        }
    }

    /// Every console page and route (with `uid` and made-up ids in their paths).
    static func everyRoute(uid: String) -> [(String, String)] {
        [
            ("GET", "/admin/"), ("GET", "/admin/users"), ("GET", "/admin/users/\(uid)"), ("GET", "/admin/users/\(uid)/photo"),
            ("GET", "/admin/keys"), ("GET", "/admin/webhooks"), ("GET", "/admin/activity"),
        ] + writes(uid: uid)
    }

    /// Every console write.
    static func writes(uid: String) -> [(String, String)] {
        [
            ("POST", "/admin/users/\(uid)/disable"), ("POST", "/admin/users/\(uid)/enable"), ("POST", "/admin/users/\(uid)/claims"),
            ("POST", "/admin/users/\(uid)/sessions/s-1/revoke"), ("POST", "/admin/users/\(uid)/sessions/revoke-all"),
            ("POST", "/admin/users/\(uid)/providers/github.com/unlink"), ("POST", "/admin/users/\(uid)/delete"), ("POST", "/admin/keys"),
            ("POST", "/admin/keys/k-1/revoke"), ("POST", "/admin/webhooks/deliveries/d-1/redeliver"),
        ]
    }

    @Test(
        "an allowed web origin (the app's, often of the gateway's own site, so the console's cookie rides on its fetch) reads no console page: no CORS headers, its preflight refused"
    )
    func consoleIsNotSharedWithAllowedOrigins() async throws {
        try await Self.withConsole { deployment in
            let (operatorBrowser, uid) = try await Self.signedInOperator(deployment)
            var app = operatorBrowser
            app.origin = "https://app.example.com"
            // The control: the app's origin is allowed, and the API shares its answers with it.
            let fetch: OutboundHeaders = ["Origin": "https://app.example.com"]  // what a credentialed fetch sends on a GET
            let me = try await app.send("\(deployment.gatewayURL)/v1/me", headers: fetch)
            #expect(me.status == 200 && me.headers["access-control-allow-origin"] == "https://app.example.com")
            // The router skips empty segments: `//admin/users` is the console too.
            for (method, path) in Self.everyRoute(uid: uid) + [("GET", "//admin/users"), ("GET", "/admin//users")] where method == "GET" {
                let page = try await app.send("\(deployment.gatewayURL)\(path)", headers: fetch)
                #expect(page.headers["access-control-allow-origin"] == nil, "\(path): \(page.status)")
                #expect(page.headers["access-control-allow-credentials"] == nil, "\(path)")
            }
            for path in ["/admin", "/admin/users", "/admin/keys", "//admin/users"] {
                let preflight = try await app.send(
                    "\(deployment.gatewayURL)\(path)", method: "OPTIONS",
                    headers: ["Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "content-type"])
                #expect(preflight.status == 403 && preflight.bodyText.contains("origin-not-allowed"), "\(path): \(preflight.status)")
                #expect(preflight.headers["access-control-allow-origin"] == nil, "\(path)")
            }
            // A path that only starts like the console's is not the console.
            let lookalike = try await app.send("\(deployment.gatewayURL)/administrator", headers: fetch)
            #expect(lookalike.headers["access-control-allow-origin"] == "https://app.example.com", "\(lookalike.status)")
        }
    }

    @Test("a cross-site form to every console write is refused with 403 and changes nothing; markup in a name and in a search is shown as text")
    func hostileInputs() async throws {
        try await Self.withConsole { deployment in
            let key = try await ProviderAPITests.key(deployment, ["admin", "profile:read"])
            var mallory = Browser(deployment)
            let signedIn = try jsonObject(try await mallory.complete(login: "markup-mallory"))
            let uid = try #require((signedIn["user"] as? [String: Any])?["uid"] as? String)
            var (browser, _) = try await Self.operatorBrowser(deployment)
            var foreign = browser
            foreign.origin = "https://evil.example"
            for (method, path) in Self.writes(uid: uid) {
                let answer = try await foreign.send(
                    "\(deployment.gatewayURL)\(path)", method: method, headers: ["Content-Type": "application/x-www-form-urlencoded"],
                    body: Array("confirm=\(uid)&claims=%7B%7D&name=x&scope=admin".utf8))
                #expect(answer.status == 403 && answer.bodyText.contains("origin-not-allowed"), "\(path): \(answer.status)")
            }
            let signOut = try await foreign.send("\(deployment.gatewayURL)/admin/sign-out", method: "POST")
            #expect(signOut.status == 403 && signOut.bodyText.contains("origin-not-allowed"), "sign-out: \(signOut.status)")
            #expect(signOut.headers["x-frame-options"] == "DENY" && signOut.headers.values("set-cookie").isEmpty)
            var noOrigin = browser
            noOrigin.origin = nil
            #expect(try await noOrigin.send("\(deployment.gatewayURL)/admin/users/\(uid)/disable", method: "POST").status == 403)
            #expect(try await Self.user(deployment, uid, key: key)?["disabled"] as? Bool == false)
            let keys = try jsonObject(try await ProviderAPITests.call(deployment, "/v1/admin/keys", key: key))["keys"] as? [[String: Any]]
            #expect(keys?.count == 1, "only the test's own key: the cross-site forms created none")

            // Markup whose `<`, `>` and `"` each share a character with the scalar before them
            // (U+0D4E, a letter, joins what follows it): escaped scalar by scalar, it is text too.
            let joined = "job \u{D4E}<meta http-equiv=refresh content=0;url=https://evil.example/ \u{D4E}>\u{D4E}\"<b\u{301}>"
            let named = try await AdminRoutesTests.call(
                deployment, "/v1/admin/keys", key: key, method: "POST",
                body: String(decoding: try JSONSerialization.data(withJSONObject: ["name": joined, "scopes": ["profile:read"]]), as: UTF8.self))
            #expect(named.status == 201 || named.status == 200, "\(named.bodyText)")
            let listing = Array(try await browser.send("\(deployment.gatewayURL)/admin/keys").body)
            // Compared as bytes: a comparison of characters would not see `<` inside "\u{D4E}<".
            func holds(_ text: String) -> Bool { listing.firstRange(of: Array(text.utf8)) != nil }
            #expect(
                !holds("<meta http-equiv") && !holds("\u{D4E}>") && !holds("\u{D4E}\"") && !holds("<b\u{301}"),
                "\(String(decoding: listing, as: UTF8.self))")
            #expect(holds("\u{D4E}&lt;meta http-equiv") && holds("\u{D4E}&gt;\u{D4E}&quot;&lt;b\u{301}&gt;"))

            // The name is markup; every page shows it as text.
            for path in ["/admin/users", "/admin/users/\(uid)", "/admin/users?query=mallory"] {
                let page = try await browser.send("\(deployment.gatewayURL)\(path)")
                #expect(page.status == 200 && !page.bodyText.contains("<script>alert") && !page.bodyText.contains("<b>Mallory"), "\(path)")
                #expect(page.bodyText.contains("&lt;script&gt;alert("), "\(path)")
            }
            // SQL and wildcards in a search are text.
            for query in ["%25", "_", "%27%20OR%20%271%27%3D%271", "%5C", "*"] {
                let page = try await browser.send("\(deployment.gatewayURL)/admin/users?query=\(query)")
                #expect(page.status == 200 && !page.bodyText.contains("/admin/users/\(uid)\""), "\(query)")
            }
        }
    }

    @Test(
        "gatehouse serve with GATEHOUSE_ADMIN_CLAIM and the console off: a users:claims key cannot plant the operator claim for the day the console is turned on"
    )
    func operatorClaimProtectedWithConsoleOff() async throws {
        try await withEmulatorAndFolder("claim") { emulatorURL, folder in
            let key = TokenVault.generateKey()
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let serve = try await ServeProcess.start(
                name: "serve", database: nil, emulatorURL: emulatorURL, key: key, folder: folder, extra: ["GATEHOUSE_ADMIN_CLAIM": "staff"],
                without: ["GATEHOUSE_ADMIN_CONSOLE"])
            defer { serve.process.stop() }
            #expect(try await client.execute(OutboundRequest(url: "\(serve.url)/admin/")).status == 404, "the console is off")
            let chain = try await DatabaseFailoverTests.signIn(client: client, gateway: serve.url)
            let uid = try #require(try HookTests.claims(chain.idToken)["sub"] as? String)
            func serviceKey(_ scopes: String) async throws -> String {
                let created = try await KeysCommandTests.run(
                    ["keys", "create-service", "labels", "--scopes", scopes, "--data-dir", "\(folder)/serve-data"],
                    environment: ["GATEHOUSE_ENCRYPTION_KEY": key.base64EncodedString()])
                #expect(created.status == 0, "\(created.output)")
                return try #require(created.output.split(separator: "\n").last.map(String.init))
            }
            let (narrow, admin) = (try await serviceKey("users:claims,profile:read"), try await serviceKey("users:claims,admin"))
            func put(_ body: String, key: String) async throws -> OutboundResponse {
                try await client.execute(
                    OutboundRequest(
                        method: "PUT", url: "\(serve.url)/v1/users/\(uid)/claims",
                        headers: ["Authorization": "Bearer \(key)", "Content-Type": "application/json"], body: Array(body.utf8)))
            }
            func stored() async throws -> [String: Any] {
                let user = try await client.execute(
                    OutboundRequest(url: "\(serve.url)/v1/users/\(uid)", headers: ["Authorization": "Bearer \(narrow)"]))
                return try jsonObject(user)["customClaims"] as? [String: Any] ?? [:]
            }
            let planted = try await put(#"{"plan":"pro","staff":true}"#, key: narrow)
            #expect(planted.status == 403, "\(planted.bodyText)")
            #expect(try jsonObject(planted)["code"] as? String == "permission-denied")
            #expect((try jsonObject(planted)["detail"] as? String)?.contains("GATEHOUSE_ADMIN_CLAIM") == true)
            #expect(try await stored().isEmpty, "nothing stored")
            // Claims that leave it alone are the key's to set; an admin key may grant it.
            #expect(try await put(#"{"plan":"pro"}"#, key: narrow).status == 200)
            #expect(try await put(#"{"plan":"pro","staff":true}"#, key: admin).status == 200)
            #expect(try await stored()["staff"] as? Bool == true)
        }
    }

    /// What the admin API says of an account (`nil`: there is none), through a service key.
    static func user(_ deployment: TestDeployment, _ uid: String, key: String) async throws -> [String: Any]? {
        let answer = try await ProviderAPITests.call(deployment, "/v1/users/\(uid)", key: key)
        return answer.status == 404 ? nil : try jsonObject(answer)
    }

    /// The ids of an account's live sessions, through the admin API.
    static func sessions(_ deployment: TestDeployment, _ uid: String, key: String) async throws -> [String] {
        let answer = try await ProviderAPITests.call(deployment, "/v1/admin/users/\(uid)/sessions", key: key)
        return (try jsonObject(answer)["sessions"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    /// The uid of the first user link on a users page.
    static func firstUserLink(_ html: String) -> String? {
        guard let range = html.range(of: #"href="/admin/users/([^"]+)""#, options: .regularExpression) else { return nil }
        return String(html[range].dropFirst(#"href="/admin/users/"#.count).dropLast())
    }
}

extension ConsoleTests {
    @Test(
        "console cookies naming no session count against the client's credential budget; past it the console answers its own 429 page, with Retry-After and the console's headers"
    )
    func consoleCookiesCountAgainstTheBudget() async throws {
        try await withDeployment(gateway: {
            $0.console = ConsoleConfiguration(operators: ["octocat@github.com"])
            $0.credentialFailureLimitPerMinute = 2
            $0.clock = StoppedClock()
        }) { deployment in
            func page(_ path: String, sessionCookie: Bool = false) async throws -> OutboundResponse {
                var cookies = "gatehouse-console=\(SecureRandom.token(byteCount: 32))"
                if sessionCookie { cookies += "; gatehouse-session=\(SecureRandom.token(byteCount: 32))" }
                return try await deployment.client.execute(OutboundRequest(url: "\(deployment.gatewayURL)\(path)", headers: ["Cookie": cookies]))
            }
            // A signed-out answer is the entry page: a console cookie and a session cookie looked
            // up, each naming nothing. With a budget of 2, the entry page's own look-up of the
            // session cookie is the one refused.
            let first = try await page("/admin/users", sessionCookie: true)
            #expect(first.status == 429)
            #expect(first.headers["content-security-policy"]?.hasPrefix("default-src 'none'") == true, "the console's own page")
            for path in ["/admin/users", "/admin/", "/admin/keys"] {
                let refused = try await page(path)
                #expect(refused.status == 429, "\(path)")
                #expect(refused.bodyText.contains("rate-limited"), "\(path)")
                #expect((Int(refused.headers["retry-after"] ?? "") ?? 0) >= 1, "\(path)")
                #expect(refused.headers["content-security-policy"]?.hasPrefix("default-src 'none'") == true, "\(path)")
                #expect(refused.headers["x-frame-options"] == "DENY", "\(path)")
            }
        }
    }
}
