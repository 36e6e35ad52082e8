import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird

/// `/v1/auth/…`: start, callback, result, ID-token sign-in, pending-credential link, sign-in
/// methods, sign-out.
struct AuthRoutes {
    let gatehouse: Gatehouse
    let browser: BrowserPolicy

    func register(into table: inout RouteTable) {
        let cookies = CookiePolicy(gatehouse.configuration)
        let signIn = gatehouse.signIn
        let sessions = gatehouse.sessions
        let accounts = gatehouse.accounts
        let browser = self.browser
        let methodsLookup = gatehouse.configuration.signInMethodsLookup
        let transactionLifetime = Int(gatehouse.configuration.transactionLifetime)
        let sessionLifetime = Int(gatehouse.configuration.sessionLifetime)

        /// Replaces the browser's session cookie with a new session (no fixation).
        @Sendable func setSession(_ response: inout Response, _ request: Request, value: String) async throws {
            try await sessions.endSession(cookie: request.cookie(cookies.sessionName))
            response.headers.append(
                HTTPField(name: .setCookie, value: cookies.setCookie(name: cookies.sessionName, value: value, maxAge: sessionLifetime)))
        }

        table.add(.get, "/v1/auth/{providerId}/start") { request, context in
            try await browser.limit("start", request, context)
            let providerId = try context.parameters.require("providerId")
            let query: [(String, String)]
            let owner: FlowOwner?
            // A start URL an app made with its ID token is the app's own, wherever it is opened.
            var fromElsewhere = false
            if let token = request.queryDictionary["start_token"] {
                // An app's one-time start URL: its parameters and account, checked when it was made.
                (query, owner) = try await signIn.takeStartLink(token: token, providerId: providerId)
            } else {
                fromElsewhere = browser.navigationFromElsewhere(request)
                // Only link and re-authentication look at who is signed in.
                let mode = try SignInMode(parameter: request.queryDictionary["mode"])
                let signedIn = mode == .signIn ? nil : try await context.user()
                // Another site's page must not start a link or a re-authentication on the user's
                // cookie (a top-level GET navigation carries it under SameSite=Lax).
                try browser.requireNavigationFromAllowedPage(request, caller: signedIn)
                // Adding a sign-in method is as sensitive as removing one.
                if mode == .link, let signedIn { try sessions.requireRecentLogin(signedIn) }
                (query, owner) = (request.queryPairs, signedIn.map { FlowOwner(uid: $0.uid, sessionFamilyId: $0.familyId) })
            }
            let start = try await signIn.start(
                providerId: providerId, query: query, existingBinding: request.cookie(cookies.transactionName), signedIn: owner,
                fromElsewhere: fromElsewhere, logger: context.logger)
            var response =
                request.wantsJSON
                ? try Response.json(["authorizationUrl": start.authorizationURL])
                : Response(status: .found, headers: [.location: start.authorizationURL, .cacheControl: "no-store"])
            response.headers.append(cookies.transactionCookie(start.bindingValue, maxAge: transactionLifetime))
            return response
        }

        let callback: @Sendable (Request, GatehouseRequestContext) async throws -> Response = { request, context in
            try await browser.limit("callback", request, context)
            var request = request
            var parameters = request.queryDictionary
            if request.method == .post {
                let body = try await request.collectBody(upTo: 64 << 10)
                for (key, value) in FormEncoding.decode(String(buffer: body)) where parameters[key] == nil { parameters[key] = value }
            }
            let completion = try await signIn.callback(
                providerId: try context.parameters.require("providerId"), parameters: parameters,
                binding: request.cookie(cookies.transactionName), client: browser.signInClient(request, context), logger: context.logger)
            if let consent = completion.consent {
                var page = ConsentPage.response(consent)
                // The page's answer needs the transaction cookie, set at the start: it lives on
                // for as long as the page can be answered (ten minutes from now, not from the start).
                if let binding = request.cookie(cookies.transactionName) {
                    page.headers.append(cookies.transactionCookie(binding, maxAge: Int(SignInService.consentLifetime)))
                }
                return page
            }
            var response = Response(status: .seeOther, headers: [.location: completion.redirectURL, .cacheControl: "no-store"])
            if let session = completion.sessionValue {
                try await setSession(&response, request, value: session)
            }
            return response
        }
        table.add(.get, "/v1/auth/{providerId}/callback", callback)
        table.add(.post, "/v1/auth/{providerId}/callback", callback)

        // A one-time start URL for an app's link or re-authentication (the app's bearer token
        // cannot travel into the system browser): the body's members are the start's parameters.
        table.add(.post, "/v1/auth/{providerId}/start-url") { request, context in
            try await browser.limit("start", request, context)
            let signedIn = try await context.requireUser()
            try browser.requireAllowedOrigin(request, caller: signedIn)
            let object = try await Self.jsonObject(request, limit: 8 << 10)
            var parameters: [(String, String)] = []
            for (key, value) in object.sorted(by: { $0.key < $1.key }) {
                guard let text = value as? String else {
                    throw GatehouseError.invalidArgument("\(key.truncated(toBytes: 64).debugDescription) must be a string.")
                }
                parameters.append((key, text))
            }
            if (try SignInMode(parameter: object["mode"] as? String)) == .link { try sessions.requireRecentLogin(signedIn) }
            let link = try await signIn.makeStartLink(
                providerId: try context.parameters.require("providerId"), parameters: parameters, uid: signedIn.uid,
                familyId: signedIn.familyId)
            var response = try Response.json(link)
            response.headers[.cacheControl] = "no-store"
            return response
        }

        // The consent page's answer: a form post from the gateway's own page (its Origin, when
        // the browser sends one), with the page's one-time token and the transaction cookie.
        let ownOrigin = gatehouse.configuration.publicOrigin
        table.add(.post, "/v1/auth/consent") { request, context in
            try await browser.limit("consent", request, context)
            if let origin = request.headers[.origin], origin != ownOrigin { throw GatehouseError.originNotAllowed() }
            var request = request
            let body = try await request.collectBody(upTo: 4 << 10)
            let form = Dictionary(FormEncoding.decode(String(buffer: body)), uniquingKeysWith: { first, _ in first })
            guard let token = form["consent"], let decision = form["decision"], ["continue", "cancel"].contains(decision) else {
                throw GatehouseError.invalidArgument("The form needs consent and decision (continue or cancel).")
            }
            let completion = try await signIn.answerConsent(
                token: token, binding: request.cookie(cookies.transactionName), proceed: decision == "continue",
                browserSession: try await sessions.caller(sessionCookie: request.cookie(cookies.sessionName))?.familyId,
                client: browser.signInClient(request, context), logger: context.logger)
            return Response(status: .seeOther, headers: [.location: completion.redirectURL, .cacheControl: "no-store"])
        }

        table.add(.post, "/v1/auth/result") { request, context in
            try await browser.limit("result", request, context)
            // Any content type: the result id is itself the secret, and no cookie is involved.
            let object = try await Self.jsonObject(request, limit: 16 << 10, requireJSONType: false)
            guard let id = object["result"] as? String else {
                throw GatehouseError.invalidArgument("The body must be a JSON object with a string member \"result\".")
            }
            guard object["result_verifier"] == nil || object["result_verifier"] is String else {
                throw GatehouseError.invalidArgument("result_verifier must be a string.")
            }
            let confirmLink = object["confirm_link"].flatMap { $0 is NSNull ? nil : $0 }
            guard confirmLink.map(Self.isJSONBoolean) ?? true else {
                throw GatehouseError.invalidArgument("confirm_link must be true or false.")
            }
            // Encoded once by the service (`json(body:)` answers no-store).
            let answer = try await signIn.resultJSON(
                id: id, verifier: object["result_verifier"] as? String, confirmLink: confirmLink as? Bool,
                client: browser.signInClient(request, context), logger: context.logger)
            return Response.json(body: ByteBuffer(data: answer))
        }

        table.add(.post, "/v1/auth/idtoken") { request, context in
            try await browser.limit("idtoken", request, context)
            let object = try await Self.jsonObject(request, limit: 32 << 10)
            guard let providerId = object["providerId"] as? String else {
                throw GatehouseError.invalidArgument("The body must be a JSON object with a string member \"providerId\".")
            }
            for key in ["idToken", "rawNonce", "accessToken", "mode"] where object[key] != nil && !(object[key] is String) {
                throw GatehouseError.invalidArgument("\(key) must be a string.")
            }
            let mode = try SignInMode(parameter: object["mode"] as? String)
            let signedIn = mode == .signIn ? nil : try await context.user()
            try browser.requireAllowedOrigin(request, caller: signedIn)
            if mode == .link, let signedIn { try sessions.requireRecentLogin(signedIn) }
            let established = try await signIn.signIn(
                providerId: providerId, idToken: object["idToken"] as? String, rawNonce: object["rawNonce"] as? String,
                accessToken: object["accessToken"] as? String, mode: mode,
                signedIn: signedIn.map { FlowOwner(uid: $0.uid, sessionFamilyId: $0.familyId) },
                client: browser.signInClient(request, context), logger: context.logger)
            var response = try Response.json(established.result)
            response.headers[.cacheControl] = "no-store"
            if let session = established.session { try await setSession(&response, request, value: session) }
            return response
        }

        table.add(.post, "/v1/auth/link") { request, context in
            try await browser.limit("link", request, context)
            let signedIn = try await context.requireUser()
            try browser.requireAllowedOrigin(request, caller: signedIn)
            let object = try await Self.jsonObject(request, limit: 4 << 10)
            guard let pendingToken = object["pendingToken"] as? String else {
                throw GatehouseError.invalidArgument("The body must be a JSON object with a string member \"pendingToken\".")
            }
            try sessions.requireRecentLogin(signedIn)
            let linked = try await accounts.claimPending(
                uid: signedIn.uid, pendingToken: pendingToken, signedInAt: signedIn.signedInAt, client: browser.signInClient(request, context))
            return try Response.json(["user": linked.profile])
        }

        table.add(.get, "/v1/auth/methods") { request, context in
            guard methodsLookup else {
                throw GatehouseError.operationNotAllowed(
                    "Looking up sign-in methods by email is turned off on this gateway (email-enumeration protection).", situation: .hiddenFeature)
            }
            try await browser.limit("methods", request, context)
            guard let email = request.queryDictionary["email"] else { throw GatehouseError.invalidArgument("email is required.") }
            return try Response.json(SignInMethods(signInMethods: try await accounts.signInMethods(email: email)))
        }

        table.add(.post, "/v1/auth/signout") { request, context in
            let allParameter = request.queryDictionary["all"] ?? "false"
            guard allParameter == "true" || allParameter == "false" else {
                throw GatehouseError.invalidArgument("all must be true or false.")
            }
            // Without a bearer token the request may ride on the cookie: a cross-site form must
            // not sign the user out, so an allowed Origin is required whoever is signed in.
            try browser.requireAllowedOrigin(request)
            // A forged bearer token, or one whose session has ended, has nothing to sign out:
            // `204`, the cookie cleared. An expired one is `401 id-token-expired` (its session
            // may live on: the caller refreshes, then signs out), and a store that cannot be
            // read is `503`, both with the cookie kept: a `204` means the sessions are ended.
            let signedIn: SessionService.Caller?
            do {
                signedIn = try await context.user()
            } catch let error as GatehouseError where error.code == .invalidIDToken {
                signedIn = nil
            }
            // A bearer caller's browser may hold another session's cookie, which the answer
            // clears: that session ends too. Looked up first: once the bearer's sessions have
            // ended, a cookie of one of them would name nothing (and count as a failure).
            let all = allParameter == "true"
            let cookieCaller =
                request.headers[.authorization] == nil
                ? nil : try await browser.caller(sessionCookie: context.credentials.sessionCookie, in: sessions, request, context)
            try await sessions.signOut(signedIn, all: all)
            if let cookieCaller, cookieCaller.familyId != signedIn?.familyId, !(all && cookieCaller.uid == signedIn?.uid) {
                try await sessions.signOut(cookieCaller, all: false)
            }
            var response = Response(status: .noContent, headers: [.cacheControl: "no-store"])
            response.headers.append(HTTPField(name: .setCookie, value: cookies.deleteCookie(name: cookies.sessionName)))
            return response
        }
    }

    /// `GET /v1/auth/methods`.
    struct SignInMethods: Encodable {
        let signInMethods: [String]
    }

    /// Whether a member of a `JSONSerialization` object is JSON's `true` or `false`: the class
    /// it gives booleans (a Swift `Bool` too, should it ever give those), never a number, which
    /// would bridge to `Bool` as well.
    static func isJSONBoolean(_ value: Any) -> Bool {
        type(of: value) == jsonBooleanType || type(of: value) == Bool.self
    }

    /// The class `JSONSerialization` gives JSON's booleans.
    private static let jsonBooleanType: Any.Type = type(of: NSNumber(value: true) as Any)

    /// A JSON request body as an object. JSON only: a cross-site HTML form cannot send it
    /// without a CORS preflight.
    static func jsonObject(_ request: Request, limit: Int, requireJSONType: Bool = true) async throws -> [String: Any] {
        var request = request
        guard !requireJSONType || request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
            throw GatehouseError.invalidArgument("The body must be application/json.")
        }
        let body = try await request.collectBody(upTo: limit)
        guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any] else {
            throw GatehouseError.invalidArgument("The body must be a JSON object.")
        }
        return object
    }
}
