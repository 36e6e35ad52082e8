import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A native or desktop app's client of a Gatehouse gateway (Foundation only, no gateway
/// code): builds the sign-in URL with a fresh result verifier, redeems the result the
/// gateway returned to the app, keeps the gateway's tokens and refreshes them (each refresh
/// token is single use), and calls the profile routes with them. Problem documents arrive
/// as `GatehouseClientError.problem` with a typed `ProblemCode`.
public actor GatehouseClient {
    /// The gateway's public URL.
    public nonisolated let baseURL: URL
    private let session: URLSession
    /// Whether `session` is the client's own, made to refuse redirects (see `init`).
    private let ownsSession: Bool
    /// The tokens of the signed-in user, `nil` before a sign-in and after sign-out.
    public private(set) var credentials: Credentials? {
        didSet { if credentials != oldValue { onCredentialsChange?(credentials) } }
    }
    /// The refresh in progress, which concurrent calls share (a second would spend the same
    /// single-use refresh token).
    private var refreshing: Task<Credentials, any Error>?
    /// Told every change of `credentials` (a sign-in, each refresh, a sign-out, a refresh
    /// token found dead): where the app saves them (the keychain). Each refresh spends the
    /// refresh token it used, so credentials saved before a refresh are of no further use: the
    /// gateway takes a spent token for a stolen one and ends the session.
    private let onCredentialsChange: (@Sendable (Credentials?) -> Void)?
    /// How long after a refresh was first sent it may be sent again: the gateway's retry window
    /// less 2 s for the clocks' and the network's delays (`exchange`).
    private let refreshRetryBudget: Duration

    /// A client of the gateway at `baseURL` (`https://gatehouse.example.com`; `http` only to a
    /// loopback address, else every call throws `invalidArgument`). `onCredentialsChange` is
    /// called with each new value of `credentials` (`nil`: signed out), on the client's actor:
    /// save them there, and `restore` them at the next start. One client per app process: two
    /// clients refreshing one session spend each other's refresh tokens.
    ///
    /// The gateway's answers are never redirects, and a redirect followed would carry the ID
    /// token (its `Authorization` field) wherever a misconfigured proxy points, and on platforms
    /// that resend a 307's body the refresh token or a result's verifier as well. So a
    /// `session` without a delegate is replaced by one made from its configuration (its
    /// protocol classes, proxies and timeouts) that never follows a redirect. A `session` with
    /// a delegate of its own (certificate pinning, client certificates) is used as it is, so
    /// that its delegate keeps answering; that delegate must refuse redirects itself
    /// (`urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)` handing
    /// back `nil`), or a followed redirect carries the request where it points. Either way a
    /// redirect's answer, and an answer from another origin, is `unexpectedAnswer`, and the
    /// credentials stay as they were.
    ///
    /// `refreshRetryWindow` is the gateway's `GATEHOUSE_REFRESH_RETRY_WINDOW` (10 s by
    /// default; read as 0–60 s, as the gateway reads it): a refresh whose answer was lost is sent
    /// again only within it, less 2 s for the clocks' and the network's delays (none at all
    /// under 2 s). It must never be longer than the gateway's: a retry after the gateway's
    /// window presents a spent refresh token, and the gateway ends the session. While the
    /// gateway's instances are configured differently, give the shortest.
    public init(
        baseURL: URL, session: URLSession = .shared, refreshRetryWindow: Duration = .seconds(10),
        onCredentialsChange: (@Sendable (Credentials?) -> Void)? = nil
    ) {
        self.baseURL = baseURL
        refreshRetryBudget = max(.zero, min(refreshRetryWindow, .seconds(60)) - .seconds(2))
        ownsSession = session.delegate == nil
        self.session =
            ownsSession ? URLSession(configuration: session.configuration, delegate: RefusingRedirects.shared, delegateQueue: nil) : session
        self.onCredentialsChange = onCredentialsChange
    }

    deinit {
        // A session with a delegate lives until it is invalidated (only the client's own).
        if ownsSession { session.finishTasksAndInvalidate() }
    }

    /// Credentials kept from an earlier run (the keychain).
    public func restore(_ credentials: Credentials?) { replace(with: credentials) }

    /// Sets the signed-in user's credentials; a refresh in flight for the ones they replace is
    /// no longer joined (its answer belongs to that account).
    private func replace(with credentials: Credentials?) {
        self.credentials = credentials
        refreshing = nil
    }

    /// A sign-in with `providerId` returning to `returnTo` — the app's own scheme
    /// (`com.example.app:/oauth2redirect`) or a loopback address it listens on
    /// (`http://127.0.0.1:53124/callback`, which the allow-list entry `http://127.0.0.1/callback`
    /// admits on any port). Open
    /// `request.url`, then hand the URL the app is called back with to `completeSignIn`.
    public nonisolated func signInRequest(
        providerId: String, returnTo: String, scopes: [String] = [], customParameters: [String: String] = [:]
    ) throws -> SignInRequest {
        try SignInRequest(baseURL: baseURL, providerId: providerId, returnTo: returnTo, scopes: scopes, customParameters: customParameters)
    }

    /// Adds `providerId` to the signed-in account: the gateway makes a one-time start URL
    /// (valid two minutes) with the client's ID token; open `request.url` in the system's
    /// authentication session and hand the URL the app is called back with to
    /// `completeSignIn`, which answers the link's result (the account's tokens do not change).
    /// Needs a recent sign-in (`requires-recent-login` otherwise: re-authenticate first).
    public func linkRequest(
        providerId: String, returnTo: String, scopes: [String] = [], customParameters: [String: String] = [:]
    ) async throws -> SignInRequest {
        try await startRequest(mode: "link", providerId: providerId, returnTo: returnTo, scopes: scopes, customParameters: customParameters)
    }

    /// Signs in again with `providerId`, already linked to the account (a fresh sign-in time for
    /// sensitive actions, or more scopes for the provider's API); completed by
    /// `completeSignIn`, which keeps the new session's tokens.
    public func reauthenticateRequest(
        providerId: String, returnTo: String, scopes: [String] = [], customParameters: [String: String] = [:]
    ) async throws -> SignInRequest {
        try await startRequest(
            mode: "reauthenticate", providerId: providerId, returnTo: returnTo, scopes: scopes, customParameters: customParameters)
    }

    /// `POST /v1/auth/{providerId}/start-url` with the ID token: a start URL for the signed-in account.
    private func startRequest(
        mode: String, providerId: String, returnTo: String, scopes: [String], customParameters: [String: String]
    ) async throws -> SignInRequest {
        let (verifier, challenge) = SignInRequest.verifierAndChallenge()
        var parameters = customParameters
        parameters["return_to"] = returnTo
        parameters["mode"] = mode
        parameters["result_challenge"] = challenge
        if !scopes.isEmpty { parameters["scope"] = scopes.joined(separator: " ") }
        let body = try JSONSerialization.data(withJSONObject: parameters)
        let (data, _) = try await authorized("POST", "v1/auth/\(providerId)/start-url", body: body)
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any], let text = object["url"] as? String,
            let url = URL(string: text)
        else { throw GatehouseClientError.unexpectedAnswer(status: 200) }
        // The start URL acts for the account: only the gateway's own origin is opened.
        guard let origin = Self.origin(of: url), origin == Self.origin(of: baseURL) else {
            throw GatehouseClientError.invalidArgument(
                "The gateway's start URL is not on baseURL's origin: give the client the gateway's public URL (GATEHOUSE_PUBLIC_URL).")
        }
        return SignInRequest(url: url, returnTo: returnTo, verifier: verifier)
    }

    /// Redeems the result of `request` from the URL the app was called back with; keeps the
    /// tokens (a link's result carries none: the account's session goes on). The result is
    /// single use and bound to the request's verifier.
    ///
    /// A link first throws `.problem` with
    /// `.linkConfirmationRequired`, naming the identity it would add: show it to the user, then
    /// call again with `confirmingLink: true` (or `false` when they do not recognise it).
    @discardableResult
    public func completeSignIn(callback: URL, for request: SignInRequest, confirmingLink: Bool? = nil) async throws -> SignInResult {
        try await redeem(resultID: try request.resultID(from: callback), verifier: request.verifier, confirmingLink: confirmingLink)
    }

    /// Redeems a result id with its verifier; keeps the tokens. `confirmingLink` answers a
    /// `.linkConfirmationRequired` (see `completeSignIn(callback:for:confirmingLink:)`).
    @discardableResult
    public func redeem(resultID: String, verifier: String, confirmingLink: Bool? = nil) async throws -> SignInResult {
        var object: [String: Any] = ["result": resultID, "result_verifier": verifier]
        if let confirmingLink { object["confirm_link"] = confirmingLink }
        let body = try JSONSerialization.data(withJSONObject: object)
        let (data, _) = try await send("POST", "v1/auth/result", body: body, contentType: "application/json")
        let answer = try Self.decoder.decode(SignInAnswer.self, from: data)
        switch (answer.idToken, answer.refreshToken, answer.expiresIn) {
        case (let idToken?, let refreshToken?, let expiresIn?):
            replace(
                with: Credentials(idToken: idToken, refreshToken: refreshToken, expiresAt: Date().addingTimeInterval(TimeInterval(expiresIn))))
        case (nil, nil, nil) where answer.result.operationType == "link":
            break  // a link adds a sign-in method; the session and its tokens stay as they are
        default:
            throw GatehouseClientError.unexpectedAnswer(status: 200)
        }
        return answer.result
    }

    /// Exchanges the refresh token for new tokens (the old refresh token is spent); concurrent
    /// callers share one exchange. Its answer replaces only the credentials it started from: a
    /// sign-in, a restore or a sign-out while it runs keeps its own.
    @discardableResult
    public func refresh() async throws -> Credentials {
        if let refreshing { return try await refreshing.value }
        guard let current = credentials else { throw GatehouseClientError.notSignedIn }
        let task = Task { try await self.exchange(current.refreshToken) }
        refreshing = task
        defer { if refreshing == task { refreshing = nil } }
        do {
            let fresh = try await task.value
            if credentials == current { credentials = fresh }
            return fresh
        } catch GatehouseClientError.problem(let problem) where problem.code == .invalidRefreshToken {
            // Spent, revoked or expired: the user must sign in again.
            if credentials == current { credentials = nil }
            throw GatehouseClientError.problem(problem)
        }
    }

    /// The signed-in user's unified profile.
    public func me() async throws -> Profile {
        try Self.decoder.decode(Profile.self, from: try await authorized("GET", "v1/me").data)
    }

    /// The signed-in user's photo, `size` pixels wide where the provider offers sizes; from
    /// `providerId`'s account when given.
    public func photo(size: Int? = nil, providerId: String? = nil) async throws -> Photo {
        var query: [URLQueryItem] = []
        if let size { query.append(URLQueryItem(name: "size", value: String(size))) }
        if let providerId { query.append(URLQueryItem(name: "provider", value: providerId)) }
        let (data, response) = try await authorized("GET", "v1/me/photo", query: query)
        return Photo(
            data: data, contentType: response.value(forHTTPHeaderField: "Content-Type") ?? "application/octet-stream",
            etag: response.value(forHTTPHeaderField: "ETag"))
    }

    /// One linked provider's live profile, fetched by the gateway with the stored grant.
    public func providerProfile(_ providerId: String) async throws -> ProviderProfile {
        try Self.decoder.decode(ProviderProfile.self, from: try await authorized("GET", "v1/me/providers/\(providerId)/profile").data)
    }

    /// Signs out: the gateway ends the session (its ID and refresh tokens stop working) and
    /// the client forgets them.
    public func signOut() async throws {
        guard credentials != nil else { return }
        _ = try await authorized("POST", "v1/auth/signout")
        replace(with: nil)
    }

    // MARK: Requests

    /// A request with the ID token, refreshed first when it is about to expire, and once more
    /// if the gateway finds it expired.
    private func authorized(_ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil) async throws -> (
        data: Data, response: HTTPURLResponse
    ) {
        guard var current = credentials else { throw GatehouseClientError.notSignedIn }
        if current.expiresAt.timeIntervalSinceNow < 30 { current = try await refresh() }
        let contentType = body == nil ? nil : "application/json"
        do {
            return try await send(method, path, query: query, body: body, contentType: contentType, bearer: current.idToken)
        } catch GatehouseClientError.problem(let problem) where problem.code == .idTokenExpired {
            return try await send(method, path, query: query, body: body, contentType: contentType, bearer: try await refresh().idToken)
        }
    }

    /// `POST /v1/token` with the refresh-token grant. A refresh whose answer was lost on the way
    /// (the connection broke after the gateway rotated the token) is sent again after a moment,
    /// twice at most, while the gateway's retry window (`GATEHOUSE_REFRESH_RETRY_WINDOW`, the
    /// client's `refreshRetryWindow`) still holds it: the gateway then answers the same successor, where a retry
    /// of the spent token after the window would end the session. No retry starts once
    /// `refreshRetryBudget` has passed since the first attempt, and a retry's idle timeout is
    /// what is left of it (the first attempt keeps the session's own).
    private func exchange(_ refreshToken: String) async throws -> Credentials {
        let body = try JSONSerialization.data(withJSONObject: ["grant_type": "refresh_token", "refresh_token": refreshToken])
        let started = ContinuousClock.now
        var attempt = 0
        let data: Data
        while true {
            do {
                let left = refreshRetryBudget - (ContinuousClock.now - started)
                data = try await send("POST", "v1/token", body: body, contentType: "application/json", timeout: attempt == 0 ? nil : left).data
                break
            } catch let error as URLError
                where attempt < 2 && Self.mayHaveReachedTheGateway(error) && ContinuousClock.now - started < refreshRetryBudget
            {
                attempt += 1
                try await Task.sleep(for: .milliseconds(100 * attempt))
            }
        }
        let answer = try Self.decoder.decode(TokenAnswer.self, from: data)
        return Credentials(
            idToken: answer.idToken, refreshToken: answer.refreshToken, expiresAt: Date().addingTimeInterval(TimeInterval(answer.expiresIn)))
    }

    /// Whether a failed request may have reached the gateway and been answered on the way back
    /// (a connection lost or timed out), rather than never sent (no host, refused, offline).
    static func mayHaveReachedTheGateway(_ error: URLError) -> Bool {
        [.networkConnectionLost, .timedOut, .badServerResponse, .cannotParseResponse].contains(error.code)
    }

    /// Throws `invalidArgument` unless `baseURL` is `https`, or `http` to a loopback address
    /// (a gateway on the same machine): tokens and results never cross a network in the clear.
    static func checkTransport(_ baseURL: URL) throws {
        switch baseURL.scheme?.lowercased() {
        case "https":
            return
        case "http" where ["127.0.0.1", "::1", "[::1]", "localhost"].contains(baseURL.host?.lowercased() ?? ""):
            return
        default:
            throw GatehouseClientError.invalidArgument("The gateway's URL must use https (http only to a loopback address).")
        }
    }

    /// A URL's origin: scheme, host and port (the scheme's default when none is written).
    static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        return "\(scheme)://\(host):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }

    /// Sends a request; a status of 400 or more throws the problem document.
    private func send(
        _ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil, contentType: String? = nil, bearer: String? = nil,
        timeout: Duration? = nil
    ) async throws -> (data: Data, response: HTTPURLResponse) {
        try Self.checkTransport(baseURL)
        var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)
        if !query.isEmpty { components?.queryItems = query }
        guard let url = components?.url else { throw GatehouseClientError.invalidArgument("cannot build a URL for \(path)") }
        var request = URLRequest(url: url)
        if let timeout { request.timeoutInterval = max(1, Double(timeout.components.seconds)) }
        request.httpMethod = method
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw GatehouseClientError.unexpectedAnswer(status: 0) }
        // A redirect's body is whoever answered it, never the gateway's problem document; and
        // an answer from another origin (a redirect an app's own session followed, its delegate
        // not refusing it) is never the gateway's either.
        if (300..<400).contains(http.statusCode) { throw GatehouseClientError.unexpectedAnswer(status: http.statusCode) }
        if let answered = http.url, Self.origin(of: answered) != Self.origin(of: baseURL) {
            throw GatehouseClientError.unexpectedAnswer(status: http.statusCode)
        }
        guard http.statusCode < 300 else { throw Self.problem(data, http) }
        return (data, http)
    }

    /// The problem document of a failed answer.
    private static func problem(_ data: Data, _ response: HTTPURLResponse) -> GatehouseClientError {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any], let code = object["code"] as? String else {
            return .unexpectedAnswer(status: response.statusCode)
        }
        var extensions: [String: String] = [:]
        for (key, value) in object where !["type", "title", "status", "detail", "code"].contains(key) {
            if let text = value as? String { extensions[key] = text }
        }
        return .problem(
            Problem(
                code: ProblemCode(rawValue: code), status: response.statusCode, title: object["title"] as? String ?? "",
                detail: object["detail"] as? String ?? "", retryAfter: response.value(forHTTPHeaderField: "Retry-After").flatMap { Int($0) },
                extensions: extensions))
    }

    private static let decoder = JSONDecoder()

    /// `POST /v1/auth/result`'s answer: the result and the session's tokens.
    private struct SignInAnswer: Decodable {
        let result: SignInResult
        let idToken: String?
        let refreshToken: String?
        let expiresIn: Int?

        private enum CodingKeys: String, CodingKey { case idToken, refreshToken, expiresIn }

        init(from decoder: any Decoder) throws {
            result = try SignInResult(from: decoder)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            idToken = try container.decodeIfPresent(String.self, forKey: .idToken)
            refreshToken = try container.decodeIfPresent(String.self, forKey: .refreshToken)
            expiresIn = try container.decodeIfPresent(Int.self, forKey: .expiresIn)
        }
    }

    /// `POST /v1/token`'s answer, by its RFC 6749 member names.
    private struct TokenAnswer: Decodable {
        let idToken: String
        let refreshToken: String
        let expiresIn: Int

        enum CodingKeys: String, CodingKey {
            case idToken = "id_token"
            case refreshToken = "refresh_token"
            case expiresIn = "expires_in"
        }
    }
}

/// The delegate of the client's session: refuses each redirect, so the redirect's own answer
/// reaches the client (`unexpectedAnswer`). A session's delegate, as swift-corelibs-foundation
/// asks no task delegate of an async request.
private final class RefusingRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    static let shared = RefusingRedirects()

    // The completion-handler form: swift-corelibs-foundation calls only this one.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
