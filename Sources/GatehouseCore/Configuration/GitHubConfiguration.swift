/// A GitHub OAuth app (or GitHub App user authorization) the gateway signs in with.
public struct GitHubConfiguration: Sendable {
    /// The app's client id.
    public var clientID: String
    /// The app's client secret. Never logged.
    public var clientSecret: String
    /// `https://github.com/login/oauth/authorize` in production.
    public var authorizeURL: String
    /// `https://github.com/login/oauth/access_token` in production.
    public var tokenURL: String
    /// `https://api.github.com` in production.
    public var apiBaseURL: String
    /// Avatar URLs the gateway will fetch; anything else in `avatar_url` is ignored, so a
    /// profile field can never point the gateway at an arbitrary host.
    public var avatarURLPrefixes: [String]
    /// Scopes always requested: `read:user user:email` (the email scope is needed for the
    /// private-email case, providers.md §4.5).
    public var defaultScopes: [String]

    /// Creates a configuration; endpoints default to the real GitHub.
    public init(
        clientID: String,
        clientSecret: String,
        authorizeURL: String = "https://github.com/login/oauth/authorize",
        tokenURL: String = "https://github.com/login/oauth/access_token",
        apiBaseURL: String = "https://api.github.com",
        avatarURLPrefixes: [String] = ["https://avatars.githubusercontent.com/"],
        defaultScopes: [String] = ["read:user", "user:email"]
    ) {
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.authorizeURL = authorizeURL
        self.tokenURL = tokenURL
        self.apiBaseURL = apiBaseURL
        self.avatarURLPrefixes = avatarURLPrefixes
        self.defaultScopes = defaultScopes
    }

    /// The endpoints of a provider emulator at `baseURL`, with the demo client.
    public static func emulator(baseURL: String, clientID: String, clientSecret: String) -> Self {
        Self(
            clientID: clientID, clientSecret: clientSecret,
            authorizeURL: "\(baseURL)/github/login/oauth/authorize",
            tokenURL: "\(baseURL)/github/login/oauth/access_token",
            apiBaseURL: "\(baseURL)/github-api",
            avatarURLPrefixes: ["\(baseURL)/github-avatars/"])
    }
}
