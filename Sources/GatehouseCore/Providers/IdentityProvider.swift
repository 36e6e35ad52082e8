/// What the flow needs to build a provider's authorize request.
public struct AuthorizationRequest: Sendable {
    /// The gateway's callback for this provider.
    public var redirectURI: String
    /// The opaque `state`.
    public var state: String
    /// The `nonce` (used by OIDC providers; GitHub ignores it).
    public var nonce: String
    /// The PKCE S256 challenge.
    public var codeChallenge: String
    /// Default scopes plus the caller's additions.
    public var scopes: [String]
    /// Caller parameters forwarded verbatim (`login`, `allow_signup`, `prompt`, …).
    public var customParameters: [(String, String)]
}

/// The tokens a provider issued for a user. Kept only encrypted at rest.
public struct ProviderTokens: Sendable, Codable, Equatable {
    /// The access token.
    public var accessToken: String
    /// The refresh token, for providers that issue one.
    public var refreshToken: String?
    /// When the access token expires, if the provider says.
    public var expiresAt: Double?
    /// The scopes granted.
    public var scopes: [String]

    /// Creates a token set.
    public init(accessToken: String, refreshToken: String? = nil, expiresAt: Double? = nil, scopes: [String]) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.scopes = scopes
    }
}

/// A profile photo fetched from a provider.
public struct ProviderPhoto: Sendable {
    /// The image bytes.
    public var bytes: [UInt8]
    /// The provider's `Content-Type`, checked to be an image.
    public var contentType: String
}

/// One identity provider: authorize URL, code exchange, profile and photo.
public protocol IdentityProvider: Sendable {
    /// The provider id (`github.com`).
    var id: String { get }
    /// Scopes requested on every sign-in.
    var defaultScopes: [String] { get }
    /// The authorize URL the browser is sent to.
    func authorizationURL(for request: AuthorizationRequest) -> String
    /// Redeems an authorization code, once: a code exchange is never retried.
    func exchangeCode(_ code: String, codeVerifier: String, redirectURI: String) async throws -> ProviderTokens
    /// Fetches and normalizes the user's profile with the access token.
    func fetchProfile(tokens: ProviderTokens) async throws -> ProviderProfile
    /// Fetches the user's photo at about `size` pixels, or throws `no-photo`.
    func fetchPhoto(profile: ProviderProfile, tokens: ProviderTokens, size: Int?) async throws -> ProviderPhoto
}
