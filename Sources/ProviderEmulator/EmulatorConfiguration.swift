/// A client application registered at an emulated provider.
public struct ClientRegistration: Sendable, Codable, Equatable {
    /// The `client_id`.
    public var id: String
    /// The `client_secret`.
    public var secret: String
    /// The registered callback; `nil` accepts any loopback callback, as GitHub does for
    /// `http://127.0.0.1:<any port>/…`.
    public var callbackURL: String?

    /// Creates a registration.
    public init(id: String, secret: String, callbackURL: String? = nil) {
        self.id = id
        self.secret = secret
        self.callbackURL = callbackURL
    }
}

/// What the emulator knows before it starts.
public struct EmulatorConfiguration: Sendable {
    /// OAuth apps registered at the emulated GitHub.
    public var githubClients: [ClientRegistration]
    /// How long an authorization code stays redeemable (GitHub: 10 minutes).
    public var codeLifetime: Duration

    /// The client `gatehouse demo` uses against the emulated GitHub.
    public static let demoGitHubClient = ClientRegistration(id: "gatehouse-demo-github", secret: "gatehouse-demo-github-secret")

    /// Creates a configuration; the default registers the demo client.
    public init(githubClients: [ClientRegistration] = [demoGitHubClient], codeLifetime: Duration = .seconds(600)) {
        self.githubClients = githubClients
        self.codeLifetime = codeLifetime
    }
}
