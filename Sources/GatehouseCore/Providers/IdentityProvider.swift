import Crypto
import CurlClient

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
    /// Provider-specific context needed to refresh (Microsoft: the tenant of the token endpoint).
    public var context: String?
    /// Set when the provider refused the refresh token: calls answer `provider-reauth-required`.
    public var reauthRequired: Bool?

    /// Creates a token set.
    public init(
        accessToken: String, refreshToken: String? = nil, expiresAt: Double? = nil, scopes: [String], context: String? = nil,
        reauthRequired: Bool? = nil
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.scopes = scopes
        self.context = context
        self.reauthRequired = reauthRequired
    }

    /// The shortest and longest lifetime taken from a token endpoint's `expires_in`.
    static let lifetimeBounds: ClosedRange<Double> = 60...(365 * 86400)

    /// When an access token the provider says lives `expiresIn` seconds expires, as seconds
    /// since 1970 from `now`: `nil` when the answer gives no usable lifetime (absent, or not a
    /// finite number), and within `lifetimeBounds` otherwise, so that a broken or hostile
    /// endpoint's value (negative, zero, `1e19`) neither makes every call refresh first nor
    /// overflows the arithmetic that follows.
    static func expiry(expiresIn: Double?, now: Double) -> Double? {
        guard let expiresIn, expiresIn.isFinite else { return nil }
        return now + min(max(expiresIn, lifetimeBounds.lowerBound), lifetimeBounds.upperBound)
    }
}

/// A profile photo as a provider sends it: the head checked (`200`, an image content type,
/// a declared size under the cap), the body still arriving.
public struct ProviderPhoto: Sendable {
    /// The provider's `Content-Type`, checked to be an image.
    public var contentType: String
    /// The size the provider declared, when it did.
    public var contentLength: Int?
    /// The image bytes as they arrive; libcurl stops the transfer past the size cap.
    public var body: ResponseBody
    /// Where the image came from (its URL identifies it, size included).
    public var sourceURL: String = ""
    /// The provider's validator for it: its `ETag`, else its `Last-Modified`.
    public var validator: String?
    /// Fetched from a public photo URL (an avatar host, an OpenID `picture`), not from the
    /// provider itself: a failure of its body is never one of the provider's that its breaker
    /// counts.
    public var fromPublicURL = false

    /// The entity tag the gateway serves for this image, known at the head when the provider
    /// sent a validator: derived from the source URL, the validator, the declared length and
    /// the type, so the same image has the same tag whether it is streamed or answered from the
    /// cache, and a new image at the same URL (a new provider tag, date or size) a new one.
    /// `nil` without a validator: a changed image of the same size would keep its tag, so the
    /// tag then comes from the bytes once they are whole (`entityTag(of:contentType:)`), and a
    /// streamed answer carries none.
    public var entityTag: String? {
        guard let validator else { return nil }
        let identity = "\(sourceURL)|\(validator)|\(contentLength.map(String.init) ?? "")|\(contentType)"
        return "\"" + SecureRandom.digest(identity).prefix(32) + "\""
    }

    /// The entity tag of an image the provider sent no validator for: from its type and bytes
    /// (SHA-256, once per transfer, not per answer).
    public static func entityTag(of chunks: [[UInt8]], contentType: String) -> String {
        var hash = SHA256()
        hash.update(data: Array(contentType.utf8) + [0])
        for chunk in chunks { hash.update(data: chunk) }
        let tag = hash.finalize().withUnsafeBytes { SecureRandom.hex(UnsafeRawBufferPointer(rebasing: $0.prefix(16))) }
        return "\"" + tag + "\""
    }
}

/// What the provider's redirect back carried, with the transaction it completes.
public struct CallbackParameters: Sendable {
    /// The authorization code.
    public var code: String
    /// The PKCE verifier of the transaction.
    public var codeVerifier: String
    /// The callback URL the authorize request used.
    public var redirectURI: String
    /// The nonce of the transaction (OIDC providers check it in the ID token).
    public var nonce: String
    /// The callback's `iss` parameter (RFC 9207), if any.
    public var issuer: String?
    /// The context the provider returned with the authorize URL.
    public var context: String
}

/// Where to send the browser, and what the provider wants back at the callback.
public struct AuthorizationRedirect: Sendable {
    /// The authorize URL.
    public var url: String
    /// Stored with the transaction and handed back in `CallbackParameters.context`.
    public var context: String

    /// Creates a redirect.
    public init(url: String, context: String = "") {
        self.url = url
        self.context = context
    }
}

/// A validated sign-in at a provider: its tokens and the user's normalized profile.
public struct ProviderSignIn: Sendable {
    /// The provider tokens (stored only encrypted).
    public var tokens: ProviderTokens
    /// The normalized profile.
    public var profile: ProviderProfile
    /// The validated ID token's claims, for an ID-token sign-in (freshness and replay checks).
    public var idTokenClaims: IDTokenClaims?

    /// Pairs tokens and profile.
    public init(tokens: ProviderTokens, profile: ProviderProfile, idTokenClaims: IDTokenClaims? = nil) {
        self.tokens = tokens
        self.profile = profile
        self.idTokenClaims = idTokenClaims
    }
}

/// One identity provider: authorize URL, code exchange, profile and photo.
public protocol IdentityProvider: Sendable {
    /// The provider id (`github.com`).
    var id: String { get }
    /// Scopes requested on every sign-in.
    var defaultScopes: [String] { get }
    /// The `prompt` a re-authentication asks for when its caller chose none: `login` (OpenID
    /// Connect's "ask for the credentials again") where the provider reads it, so that a
    /// session the provider still holds in the browser does not answer for the user; `nil`
    /// where it has no such prompt (GitHub's only prompt picks an account).
    var reauthenticationPrompt: String? { get }
    /// Whether the provider reads OpenID Connect's `max_age` (Core §3.1.2.1; its ID tokens then
    /// carry `auth_time`): a re-authentication asks with `max_age=0` as well as the prompt.
    var acceptsMaxAge: Bool { get }
    /// The authorize URL the browser is sent to (OIDC providers need discovery first).
    func authorizationRedirect(for request: AuthorizationRequest) async throws -> AuthorizationRedirect
    /// Redeems the callback's code, once (a code exchange is never retried), validates what
    /// came back and returns the tokens and the profile.
    func completeSignIn(_ callback: CallbackParameters) async throws -> ProviderSignIn
    /// Signs in with an ID token obtained elsewhere; providers without ID tokens refuse.
    func signIn(idToken: String, rawNonce: String?) async throws -> ProviderSignIn
    /// Why the provider cannot sign anyone in right now, for `/readyz`; `nil` when it can.
    func readinessProblem() async -> String?
    /// `readinessProblem()` within `limit`: past it, what is known of the provider without
    /// waiting. A load balancer's probe cannot wait for a provider that is slow or down.
    func readinessProblem(within limit: Duration) async -> String?
    /// A new access token from the refresh token (the refresh token may rotate); throws
    /// `provider-reauth-required` when the grant is gone.
    func refresh(_ tokens: ProviderTokens) async throws -> ProviderTokens
    /// Fetches and normalizes the user's profile with the access token.
    func fetchProfile(tokens: ProviderTokens) async throws -> ProviderProfile
    /// Fetches the profile again, knowing the `previous` one (its validators make the reads
    /// conditional where the provider supports them); `previous` itself when nothing changed.
    func fetchProfile(tokens: ProviderTokens, previous: ProviderProfile) async throws -> ProviderProfile
    /// Whether a fetched `profile` says for itself whether its email is verified. Where it does
    /// not (Graph's `/me` has no such flag: the proof was the ID token's `xms_edov` at sign-in),
    /// an address verified at sign-in stays verified while the provider reports the same one;
    /// where it does, its answer stands.
    func statesEmailVerification(in profile: ProviderProfile) -> Bool
    /// Opens the user's photo at about `size` pixels (its body streams), or throws `no-photo`.
    func fetchPhoto(profile: ProviderProfile, tokens: ProviderTokens, size: Int?) async throws -> ProviderPhoto
    /// Revokes the user's grant to the gateway where the provider offers it (GitHub), when
    /// the link is removed; providers without such an endpoint do nothing.
    func revokeGrant(tokens: ProviderTokens) async throws
}

extension IdentityProvider {
    /// None: the provider has no prompt that asks for the credentials again.
    public var reauthenticationPrompt: String? { nil }

    /// No `max_age`: the prompt alone asks for the credentials again.
    public var acceptsMaxAge: Bool { false }

    /// Refused: this provider issues no ID tokens.
    public func signIn(idToken: String, rawNonce: String?) async throws -> ProviderSignIn {
        throw GatehouseError.operationNotAllowed("\(id) does not sign in with ID tokens.")
    }

    /// No refresh tokens: a dead access token needs a new sign-in.
    public func refresh(_ tokens: ProviderTokens) async throws -> ProviderTokens {
        throw GatehouseError.providerReauthRequired(id)
    }

    /// No revocation endpoint: forgetting the tokens is all the gateway can do.
    public func revokeGrant(tokens: ProviderTokens) async throws {}

    /// Always ready (no discovery to depend on).
    public func readinessProblem() async -> String? { nil }

    /// No: what was verified at sign-in stays so for the same address.
    public func statesEmailVerification(in profile: ProviderProfile) -> Bool { false }
}

extension IdentityProvider {
    /// A provider without validators reads the profile anew.
    public func fetchProfile(tokens: ProviderTokens, previous: ProviderProfile) async throws -> ProviderProfile {
        try await fetchProfile(tokens: tokens)
    }
}

extension IdentityProvider {
    /// `readinessProblem()` within `limit`, else that it did not answer in time.
    public func readinessProblem(within limit: Duration) async -> String? {
        await Deadline.answer(within: limit) { await self.readinessProblem() } ?? "\(id): it did not answer within \(limit)."
    }
}
