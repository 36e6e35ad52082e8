import Foundation

/// An OpenID Connect provider signed in with through discovery: a generic `oidc.<name>`
/// provider, or a preset such as Yahoo.
public struct OIDCProviderConfiguration: Sendable {
    /// How the client authenticates at the token endpoint.
    public enum ClientAuthentication: String, Sendable {
        /// `Authorization: Basic base64(client_id:client_secret)`.
        case clientSecretBasic = "client_secret_basic"
        /// `client_id` and `client_secret` in the form body.
        case clientSecretPost = "client_secret_post"
    }

    /// How `rawNonce` of an ID-token sign-in is compared with the token's `nonce`.
    public enum NonceComparison: String, Sendable {
        /// The token's `nonce` is the SHA-256 hex digest of `rawNonce` (Firebase, Apple).
        case sha256Hex = "sha256"
        /// The token's `nonce` is `rawNonce` itself: the token then carries what proves it, so
        /// it proves nothing about who presents it.
        case raw
    }

    /// How `iss` is checked, in discovery and in ID tokens.
    public enum IssuerRule: Sendable, Equatable {
        /// Discovery's `issuer` and every token's `iss` equal `issuer` (or an additional token issuer) exactly.
        case exact
        /// Microsoft (providers.md §1.4): discovery names `{login}/{tenantid}/v2.0` (the literal
        /// template) or a tenant's `{login}/<GUID>/v2.0`; a token's `iss` must be exactly the
        /// template filled with its own `tid`, and `tid` must fit the endpoint's audience (for a
        /// domain: the tenant GUID its discovery names) and the allow-list (empty = any tenant).
        case microsoft(loginBaseURL: String, endpointTenant: String, allowedTenants: Set<String>)
    }

    /// The provider id (`oidc.<name>`, or `yahoo.com`).
    public var providerId: String
    /// The issuer; discovery's `issuer` must equal it exactly.
    public var issuer: String
    /// Further `iss` values accepted in ID tokens (Yahoo's older `https://login.yahoo.com`).
    public var additionalTokenIssuers: [String]
    /// The client id (the expected `aud`).
    public var clientID: String
    /// The client secret. Never logged. Empty: the provider serves ID-token sign-in only
    /// (`POST /v1/auth/idtoken`), and its code flow answers `operation-not-allowed`.
    public var clientSecret: String
    /// The client ids of the apps' own registrations at the provider (one per platform), also
    /// accepted as an ID token's `aud` (and `azp`) on `POST /v1/auth/idtoken`; the code flow's
    /// tokens are the gateway's client's alone.
    public var platformAudiences: [String] = []

    /// Whether the gateway can run the code flow (it has a client secret).
    public var codeFlowEnabled: Bool { !clientSecret.isEmpty }
    /// Token-endpoint authentication; `nil` takes the first method discovery supports, preferring Basic.
    public var clientAuthentication: ClientAuthentication?
    /// Scopes requested on every sign-in (`openid` is always added).
    public var defaultScopes: [String]
    /// Signature algorithms accepted in ID tokens (never `none`, never HMAC).
    public var allowedAlgorithms: Set<String>
    /// Allowed clock difference for `exp`, `iat` and `nbf`.
    public var clockSkew: TimeInterval
    /// How `rawNonce` is compared on `POST /v1/auth/idtoken`.
    public var nonceComparison: NonceComparison
    /// The least time between two JWKS fetches caused by an unknown `kid`, and between two
    /// refreshes of an expired discovery document whose provider failed to answer (the expired
    /// document serves meanwhile).
    public var jwksRefetchCooldown: TimeInterval
    /// How long discovery and JWKS answers are reused before a background refresh.
    public var metadataLifetime: TimeInterval
    /// Endpoint overrides (`authorization_endpoint`, `token_endpoint`, `userinfo_endpoint`, `jwks_uri`).
    public var endpointOverrides: [String: String]
    /// Photo URL prefixes the gateway may fetch `picture` from besides the issuer's own origin
    /// (compared as parsed origin + path prefix on a segment boundary).
    public var pictureURLPrefixes: [String]
    /// How `iss` is checked.
    public var issuerRule: IssuerRule = .exact
    /// Whether the userinfo endpoint is called (Microsoft's profile comes from Graph instead).
    public var usesUserInfo = true
    /// Whether `unauthorized_client` may be one tenant refusing the gateway's app rather than
    /// the app's registration being wrong: Microsoft's multi-tenant endpoints answer it to the
    /// users of a tenant that disabled or removed the app (AADSTS7000112, AADSTS700016), which
    /// anyone can arrange in a tenant of their own. Then it refuses that grant or sign-in alone
    /// and never marks the provider misconfigured (`/readyz`) for everyone.
    public var tenantsRefuseClients = false

    /// Creates a configuration with the defaults of a well-behaved provider.
    public init(
        providerId: String, issuer: String, clientID: String, clientSecret: String,
        additionalTokenIssuers: [String] = [], clientAuthentication: ClientAuthentication? = nil,
        defaultScopes: [String] = ["openid", "profile", "email"],
        allowedAlgorithms: Set<String> = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"],
        clockSkew: TimeInterval = 60, nonceComparison: NonceComparison = .sha256Hex, jwksRefetchCooldown: TimeInterval = 30,
        metadataLifetime: TimeInterval = 3600, endpointOverrides: [String: String] = [:], pictureURLPrefixes: [String] = []
    ) {
        self.providerId = providerId
        self.issuer = issuer
        self.additionalTokenIssuers = additionalTokenIssuers
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.clientAuthentication = clientAuthentication
        self.defaultScopes = defaultScopes
        self.allowedAlgorithms = allowedAlgorithms
        self.clockSkew = clockSkew
        self.nonceComparison = nonceComparison
        self.jwksRefetchCooldown = jwksRefetchCooldown
        self.metadataLifetime = metadataLifetime
        self.endpointOverrides = endpointOverrides
        self.pictureURLPrefixes = pictureURLPrefixes
    }

    /// Yahoo (providers.md §3): issuer `https://api.login.yahoo.com`, older tokens carry
    /// `https://login.yahoo.com`; ES256 or RS256 ID tokens.
    public static func yahoo(
        clientID: String, clientSecret: String, issuer: String = "https://api.login.yahoo.com",
        legacyIssuer: String = "https://login.yahoo.com"
    ) -> Self {
        Self(
            providerId: "yahoo.com", issuer: issuer, clientID: clientID, clientSecret: clientSecret, additionalTokenIssuers: [legacyIssuer],
            allowedAlgorithms: ["ES256", "RS256"], pictureURLPrefixes: ["https://s.yimg.com/", "https://ct.yimg.com/"])
    }

    /// The provider emulator's standard issuer at `baseURL`, as `oidc.emulator`.
    public static func emulatorIssuer(baseURL: String, clientID: String, clientSecret: String) -> Self {
        Self(providerId: "oidc.emulator", issuer: "\(baseURL)/oidc", clientID: clientID, clientSecret: clientSecret)
    }

    /// The provider emulator's Yahoo at `baseURL`.
    public static func emulatorYahoo(baseURL: String, clientID: String, clientSecret: String) -> Self {
        yahoo(clientID: clientID, clientSecret: clientSecret, issuer: "\(baseURL)/yahoo", legacyIssuer: "\(baseURL)/yahoo-legacy")
    }

    /// Whether `id` names a generic OIDC provider (`oidc.` followed by a simple name).
    public static func isGenericProviderId(_ id: String) -> Bool {
        guard id.hasPrefix("oidc."), id.count > 5, id.count <= 64 else { return false }
        return id.dropFirst(5).allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") }
    }
}
