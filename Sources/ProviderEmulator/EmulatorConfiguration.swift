import Foundation

/// A client application registered at an emulated provider.
public struct ClientRegistration: Sendable, Codable, Equatable {
    /// The `client_id`.
    public var id: String
    /// The `client_secret`.
    public var secret: String
    /// The registered callback; `nil` accepts any loopback callback, as GitHub does for
    /// `http://127.0.0.1:<any port>/…`.
    public var callbackURL: String?
    /// GitHub only: a GitHub App with expiring user tokens (`ghu_…` for 8 hours plus a
    /// single-use `ghr_…` refresh token) instead of an OAuth app's lasting `gho_…` token.
    public var expiringUserTokens: Bool?

    /// Creates a registration.
    public init(id: String, secret: String, callbackURL: String? = nil, expiringUserTokens: Bool? = nil) {
        self.id = id
        self.secret = secret
        self.callbackURL = callbackURL
        self.expiringUserTokens = expiringUserTokens
    }
}

/// How a provider compares a `redirect_uri` with the registered callback.
enum RedirectRule: Sendable {
    /// The identity platform and OpenID Providers: exactly the registered URI.
    case exact
    /// GitHub: the registered scheme, its host or a sub-domain of it, its port (any port on a
    /// loopback callback), and its path or a path below it.
    case subPath
}

extension ClientRegistration {
    /// Whether `redirectURI` may receive this client's codes. With a registered callback, the
    /// provider's rule; without one (the demo's clients, whose gateway port is chosen at
    /// start), any port on a loopback host. Never one with a fragment (RFC 6749 §3.1.2) or
    /// user information.
    func accepts(redirectURI: String, rule: RedirectRule) -> Bool {
        guard let url = URLComponents(string: redirectURI), let scheme = url.scheme, let host = url.host,
            scheme == "http" || scheme == "https", url.user == nil, url.password == nil, url.fragment == nil
        else { return false }
        guard let registered = callbackURL.flatMap(URLComponents.init(string:)) else {
            return ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host)
        }
        switch rule {
        case .exact:
            return redirectURI == callbackURL
        case .subPath:
            let base = registered.path.hasSuffix("/") ? registered.path : registered.path + "/"
            let loopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(registered.host ?? "")
            // A dot segment (or an encoded one), or an encoded separator that hides one, would
            // leave the registered path once resolved.
            let encoded = url.percentEncodedPath.lowercased()
            let segments = encoded.split(separator: "/", omittingEmptySubsequences: false)
            guard !segments.contains(where: { [".", "..", "%2e", "%2e%2e", ".%2e", "%2e."].contains($0) }),
                !encoded.contains("%2f"), !encoded.contains("%5c")
            else { return false }
            return registered.scheme == scheme && (registered.host == host || host.hasSuffix("." + (registered.host ?? "")))
                && (loopback || registered.port == url.port) && (url.path == registered.path || url.path.hasPrefix(base))
        }
    }
}

/// What the emulator knows before it starts.
public struct EmulatorConfiguration: Sendable {
    /// OAuth apps registered at the emulated GitHub.
    public var githubClients: [ClientRegistration]
    /// Clients registered at the emulated OpenID Providers, by issuer name (`oidc`, `yahoo`).
    public var oidcClients: [String: [ClientRegistration]]
    /// Apps registered at the emulated Microsoft identity platform.
    public var microsoftClients: [ClientRegistration]
    /// How long an authorization code stays redeemable (GitHub: 10 minutes).
    public var codeLifetime: Duration

    /// The client `gatehouse demo` uses against the emulated GitHub.
    public static let demoGitHubClient = ClientRegistration(id: "gatehouse-demo-github", secret: "gatehouse-demo-github-secret")
    /// A GitHub App registered at the emulated GitHub: its user tokens expire and refresh.
    public static let demoGitHubAppClient = ClientRegistration(
        id: "Iv1.gatehousedemoapp", secret: "gatehouse-demo-github-app-secret", expiringUserTokens: true)

    /// The client `gatehouse demo` uses against the emulated generic issuer (`oidc.emulator`).
    public static let demoOIDCClient = ClientRegistration(id: "gatehouse-demo-oidc", secret: "gatehouse-demo-oidc-secret")
    /// The client `gatehouse demo` uses against the emulated Yahoo (a Yahoo-style consumer key).
    public static let demoYahooClient = ClientRegistration(id: "dj0yJmk9Z2F0ZWhvdXNlLWRlbW8-", secret: "gatehouse-demo-yahoo-secret")

    /// The app `gatehouse demo` uses against the emulated Microsoft (client ids are GUIDs there).
    public static let demoMicrosoftClient = ClientRegistration(id: "11112222-bbbb-3333-cccc-4444dddd5555", secret: "gatehouse-demo-microsoft-secret")

    /// The Standard Webhooks secret the sample app's hooks (`/sample-app/hooks/…`) verify, and
    /// `gatehouse demo` signs its hook calls with. A demo value, public by design.
    public static let demoHookSecret = "whsec_Z2F0ZWhvdXNlLWRlbW8taG9vay1zZWNyZXQtMzJieXRl"

    /// The Standard Webhooks secret the sample app's webhook receiver (`/sample-app/webhooks`)
    /// verifies, and `gatehouse demo` signs its deliveries with. A demo value, public by design.
    public static let demoWebhookSecret = "whsec_Z2F0ZWhvdXNlLWRlbW8td2ViaG9vay1zZWNyZXQtMzI="

    /// Creates a configuration; the default registers the demo clients.
    public init(
        githubClients: [ClientRegistration] = [demoGitHubClient, demoGitHubAppClient],
        microsoftClients: [ClientRegistration] = [demoMicrosoftClient],
        oidcClients: [String: [ClientRegistration]] = ["oidc": [demoOIDCClient], "yahoo": [demoYahooClient]],
        codeLifetime: Duration = .seconds(600)
    ) {
        self.githubClients = githubClients
        self.microsoftClients = microsoftClients
        self.oidcClients = oidcClients
        self.codeLifetime = codeLifetime
    }
}
