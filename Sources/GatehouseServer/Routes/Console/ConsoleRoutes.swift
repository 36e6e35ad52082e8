import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird

/// The operators' console at `/admin/` (`GATEHOUSE_ADMIN_CONSOLE`): server-rendered pages over
/// the same core calls as the `/v1/admin/…` routes, for the accounts `ConsoleConfiguration`
/// names.
///
/// Who: the console has its own cookie, a `SameSite=Strict` copy of the session cookie that
/// only "Open the console" (a same-origin form) sets, so no request another site starts carries
/// it; it ends with the session. Every request re-reads the account and checks it is still an
/// operator. Every write is a form `POST` whose `Origin` must be the gateway's own; the
/// destructive ones also need a sign-in within the re-authentication window. Pages carry a CSP
/// without any script, `frame-ancestors 'none'` and `no-store`.
struct ConsoleRoutes {
    let gatehouse: Gatehouse
    let console: ConsoleConfiguration
    let cookies: CookiePolicy
    let views: ConsoleViews
    /// Who the client is, and its budget of session cookies naming nothing live.
    let browser: BrowserPolicy

    /// Users per page.
    static let pageSize = 50
    /// The strictest policy the pages work with: no script at all.
    static let contentSecurityPolicy =
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    /// The console cookie's name.
    var cookieName: String { cookies.secure ? "__Host-gatehouse-console" : "gatehouse-console" }

    /// The gateway's own origin as browsers send it (`GatewayConfiguration.publicOrigin`: scheme
    /// and host in lower case, an IPv6 host in brackets, no default port): the one `Origin`
    /// console writes accept.
    var ownOrigin: String { gatehouse.configuration.publicOrigin ?? "" }

    /// A signed-in operator: the session and the account as it is now.
    struct Operator {
        let caller: SessionService.Caller
        let profile: UnifiedProfile
        /// How pages name the operator.
        var label: String { profile.email ?? profile.displayName ?? profile.uid }
    }

    /// Why a console request cannot go on, answered as a page.
    enum Refusal: Error {
        /// No console cookie, or its session ended: back to the entry page.
        case signedOut
        /// A write whose `Origin` is not the gateway's.
        case foreignOrigin
        /// Signed in, but not an operator.
        case notAnOperator
    }

    func register(into table: inout RouteTable) {
        let routes = self
        table.add(.get, "/admin/console.css") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "public, max-age=3600"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: routes.views.stylesheet)))
        }
        table.add(.get, "/admin/") { request, context in
            try await routes.page(request, context, needsOperator: false) { _ in
                if case .some(.some) = try await routes.operatorBehind(request.cookie(routes.cookieName), request, context) {
                    return Response(status: .seeOther, headers: [.location: "/admin/users"])
                }
                return try await routes.entryPage(request, context)
            }
        }
        table.add(.post, "/admin/session") { request, context in
            try await routes.page(request, context, needsOperator: false) { _ in
                try routes.requireOwnOrigin(request)
                let value = request.cookie(routes.cookies.sessionName)
                guard let found = try await routes.operatorBehind(value, request, context), let value else { throw Refusal.signedOut }
                guard let opened = found else { throw Refusal.notAnOperator }
                // Opened only within the recent-login window of a sign-in: a session left
                // signed in on a shared machine does not open the console for the next person.
                // The entry page then offers the re-authentication links.
                guard routes.isRecent(opened) else { return Response(status: .seeOther, headers: [.location: "/admin/"]) }
                routes.gatehouse.admin.consoleOpened(by: opened.profile.uid)
                var response = Response(status: .seeOther, headers: [.location: "/admin/users"])
                response.headers[.setCookie] = routes.consoleCookie(value)
                return response
            }
        }
        table.add(.post, "/admin/sign-out") { request, context in
            try await routes.page(request, context, needsOperator: false) { _ in
                try routes.requireOwnOrigin(request)
                var response = Response(status: .seeOther, headers: [.location: "/admin/"])
                response.headers[.setCookie] = routes.consoleCookie("", maxAge: 0)
                return response
            }
        }
        registerUsers(into: &table)
        registerKeys(into: &table)
        registerWebhooks(into: &table)
        registerActivity(into: &table)
    }

    // MARK: Answers

    /// Runs `body` for a console request and renders what it refuses as a page: the entry page
    /// for a signed-out browser, `403` for a non-operator (saying nothing about any account),
    /// problems as a message page with their code.
    func page(
        _ request: Request, _ context: GatehouseRequestContext, needsOperator: Bool = true, _ body: (Operator?) async throws -> Response
    ) async throws -> Response {
        var response: Response
        var who: Operator?
        do {
            if needsOperator {
                guard let found = try await operatorBehind(request.cookie(cookieName), request, context) else { throw Refusal.signedOut }
                guard let found else { throw Refusal.notAnOperator }
                who = found
            }
            response = try await body(who)
        } catch Refusal.signedOut {
            // A browser signed in as somebody who is not an operator is told so on every page
            // and route, whatever it asks for (nothing about any account leaks that way).
            do {
                if case .some(.none) = try await operatorBehind(request.cookie(cookies.sessionName), request, context) {
                    response = notAnOperatorPage()
                } else {
                    response =
                        request.method == .get
                        ? try await entryPage(request, context) : Response(status: .seeOther, headers: [.location: "/admin/"])
                }
            } catch let error as GatehouseError {
                response = try await problemPage(error, request: request, operator: nil)
            }
        } catch Refusal.notAnOperator {
            response = notAnOperatorPage()
        } catch Refusal.foreignOrigin {
            response = views.render(
                "message",
                [
                    "title": "Refused", "heading": "Refused", "text": "Console changes are accepted from the console's own pages only.",
                    "code": GatehouseError.Code.originNotAllowed.rawValue, "back": "/admin/",
                ], status: .forbidden)
        } catch let error as GatehouseError {
            response = try await problemPage(error, request: request, operator: who)
        }
        // A photo keeps its own policy (`sandbox`: an image answer never runs as a document).
        response.headers[.contentSecurityPolicy] = response.headers[.contentSecurityPolicy] ?? Self.contentSecurityPolicy
        response.headers[.cacheControl] = response.headers[.cacheControl] ?? "no-store"
        response.headers[.referrerPolicy] = "same-origin"
        response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        return response
    }

    /// The `403` every console page and route answers an account that is not an operator.
    func notAnOperatorPage() -> Response {
        views.render(
            "message",
            [
                "title": "Not an operator", "heading": "Not an operator",
                "text": "This account may not use the console. Ask an operator to add it to GATEHOUSE_ADMINS.", "back": "/",
                "code": GatehouseError.Code.permissionDenied.rawValue,
            ], status: .forbidden)
    }

    /// A problem as a message page; `requires-recent-login` offers the re-authentication links.
    func problemPage(_ error: GatehouseError, request: Request, operator who: Operator?) async throws -> Response {
        var values: [String: Any] = [
            "title": error.title, "heading": error.title, "text": error.detail, "code": error.code.rawValue,
            "back": request.headers[.referer].flatMap { $0.hasPrefix(ownOrigin + "/admin/") ? $0 : nil } ?? "/admin/users",
        ]
        if error.code == .requiresRecentLogin, let who {
            values["canReauthenticate"] = true
            values["reauthenticate"] = reauthenticationLinks(who)
        }
        var response = views.render("message", values, operator: who, status: error.status)
        if let retryAfter = error.retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    /// "Sign in again" links, one per provider linked to the operator's account.
    func reauthenticationLinks(_ who: Operator) -> [[String: String]] {
        who.profile.providers.map { provider in
            ["id": provider.providerId, "startURL": startURL(provider.providerId, mode: "reauthenticate")]
        }
    }

    /// A sign-in start that returns to the console. The console reads the session cookie the
    /// callback sets and never fetches the one-time result, so the start binds that result
    /// (`result_challenge`, required by default) to a verifier nobody holds: it is never
    /// redeemed, and expires.
    func startURL(_ providerId: String, mode: String?) -> String {
        let returnTo = FormEncoding.escape(gatehouse.configuration.publicURL + "/admin/")
        let start = "/v1/auth/\(FormEncoding.escape(providerId))/start?return_to=\(returnTo)&result_challenge=\(SecureRandom.token())"
        return mode.map { start + "&mode=\($0)" } ?? start
    }

    /// The entry page: "Open the console" when the browser is signed in as an operator
    /// recently, re-authentication links when the sign-in is older, sign-in links when it is
    /// not signed in (a signed-in non-operator is refused).
    func entryPage(_ request: Request, _ context: GatehouseRequestContext) async throws -> Response {
        var values: [String: Any] = ["title": "Sign in"]
        if let found = try await operatorBehind(request.cookie(cookies.sessionName), request, context) {
            guard let found else { return notAnOperatorPage() }
            // Both set whatever the case: a name a section lacks is looked up outside it.
            values["signedIn"] = found.label
            values["recent"] = isRecent(found)
            let window = Int(gatehouse.configuration.recentLoginWindow)
            values["window"] =
                window >= 60 && window % 60 == 0 ? "\(window / 60) minute\(window == 60 ? "" : "s")" : "\(window) second\(window == 1 ? "" : "s")"
            values["reauthenticate"] = reauthenticationLinks(found)
        } else {
            values["providers"] = gatehouse.providers.ids.map { id in ["id": id, "startURL": startURL(id, mode: nil)] }
        }
        return views.render("entry", values)
    }

    // MARK: Who

    /// The operator behind a session cookie value: `nil` when it names no live session,
    /// `.some(nil)` when its account is not an operator (or is disabled). The cookie is looked
    /// up within the client's budget of credentials naming nothing live (`BrowserPolicy`).
    func operatorBehind(_ cookie: String?, _ request: Request, _ context: GatehouseRequestContext) async throws -> Operator?? {
        guard let caller = try await browser.caller(sessionCookie: cookie, in: gatehouse.sessions, request, context),
            let account = try await gatehouse.storage.account(uid: caller.uid)
        else { return nil }
        let profile = try await gatehouse.accounts.unifiedProfile(for: account)
        guard !profile.disabled, let admission = console.admission(profile) else { return .some(nil) }
        // An address names an operator only while it names one account: accounts that shared
        // it before the rule of one account per verified email are none of them operators.
        if case .email(let address) = admission, try await gatehouse.storage.uids(verifiedEmail: address, limit: 2) != [profile.uid] {
            return .some(nil)
        }
        return .some(Operator(caller: caller, profile: profile))
    }

    /// Whether the operator signed in within the recent-login window.
    func isRecent(_ who: Operator) -> Bool {
        (try? gatehouse.sessions.requireRecentLogin(who.caller)) != nil
    }

    /// Refuses a write whose `Origin` is not the gateway's own.
    func requireOwnOrigin(_ request: Request) throws {
        guard let origin = request.headers[.origin], origin == ownOrigin else { throw Refusal.foreignOrigin }
    }

    /// A destructive write: the gateway's own `Origin` and a recent sign-in.
    func requireDestructive(_ request: Request, _ who: Operator) throws {
        try requireOwnOrigin(request)
        try gatehouse.sessions.requireRecentLogin(who.caller)
    }

    /// The console cookie's `Set-Cookie` value: `SameSite=Strict`, for the session's lifetime.
    func consoleCookie(_ value: String, maxAge: Int? = nil) -> String {
        var parts = [
            "\(cookieName)=\(value)", "Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=\(maxAge ?? Int(gatehouse.configuration.sessionLifetime))",
        ]
        if cookies.secure { parts.append("Secure") }
        return parts.joined(separator: "; ")
    }

    /// A form body's fields (at most 16 KB).
    static func form(_ request: Request) async throws -> [String: [String]] {
        var request = request
        guard request.headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true else {
            throw GatehouseError.invalidArgument("The body must be a form (application/x-www-form-urlencoded).")
        }
        let body = try await request.collectBody(upTo: 16 << 10)
        var fields: [String: [String]] = [:]
        for (name, value) in FormEncoding.decode(String(buffer: body)) { fields[name, default: []].append(value) }
        return fields
    }

    /// A redirect after a change, naming one of `ConsoleViews.notices` for the next page.
    static func done(_ location: String, _ notice: String) -> Response {
        let separator = location.contains("?") ? "&" : "?"
        return Response(status: .seeOther, headers: [.location: location + separator + "notice=" + notice])
    }

    /// A date as the pages show it (UTC, to the minute).
    static func date(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: false).timeSeparator(.colon))
    }
}
