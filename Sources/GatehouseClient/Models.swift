import Foundation

/// The unified profile (`GET /v1/me`): one shape whichever providers are linked.
public struct Profile: Sendable, Codable, Equatable {
    /// One linked provider.
    public struct Provider: Sendable, Codable, Equatable {
        /// `github.com`, `microsoft.com`, `yahoo.com`, `oidc.<name>`.
        public var providerId: String
        /// The provider's user id.
        public var federatedId: String
        /// The provider user name (GitHub login, Microsoft UPN).
        public var username: String?
        /// The provider's display name.
        public var displayName: String?
        /// The provider's email.
        public var email: String?
        /// Whether the provider vouches for the email.
        public var emailVerified: Bool
        /// The gateway's photo route for this provider.
        public var photoURL: String?
        /// The scopes the stored grant holds (absent from gateways before 0.2).
        public var scopes: [String]?
    }

    /// The Gatehouse user id.
    public var uid: String
    /// The display name.
    public var displayName: String?
    /// The email address.
    public var email: String?
    /// Whether a provider vouches for `email`.
    public var emailVerified: Bool
    /// The gateway's photo route, when a provider has a photo.
    public var photoURL: String?
    /// The linked providers.
    public var providers: [Provider]
}

/// One provider's live profile (`GET /v1/me/providers/{id}/profile`).
public struct ProviderProfile: Sendable, Codable, Equatable {
    /// The provider id.
    public var providerId: String
    /// The provider's user id.
    public var federatedId: String
    /// The provider user name.
    public var username: String?
    /// The display name.
    public var displayName: String?
    /// The email address.
    public var email: String?
    /// Whether the provider vouches for `email`.
    public var emailVerified: Bool
}

/// What a completed sign-in answers (Firebase's `UserCredential`).
public struct SignInResult: Sendable, Codable, Equatable {
    /// The unified profile after the sign-in.
    public var user: Profile
    /// Whether this sign-in created the account.
    public var isNewUser: Bool
    /// The provider used.
    public var providerId: String
    /// `signIn`, `link` or `reauthenticate`.
    public var operationType: String
}

/// A profile photo.
public struct Photo: Sendable, Equatable {
    /// The image bytes.
    public var data: Data
    /// `image/jpeg`, `image/png`, …
    public var contentType: String
    /// The validator to revalidate with.
    public var etag: String?
}

/// The gateway's tokens for a signed-in app; store them in the keychain and hand them back
/// with `GatehouseClient.restore(_:)`.
public struct Credentials: Sendable, Codable, Equatable {
    /// The gateway ID token (a bearer token, ES256-signed).
    public var idToken: String
    /// The refresh token (single use: each refresh returns the next one).
    public var refreshToken: String
    /// When the ID token expires.
    public var expiresAt: Date

    /// Credentials as an app restores them.
    public init(idToken: String, refreshToken: String, expiresAt: Date) {
        self.idToken = idToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
    }
}
