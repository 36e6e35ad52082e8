import Foundation

/// Who is signing in, and from where: what the HTTP layer knows about the request that
/// completes a sign-in (the callback, the consent page's answer, `POST /v1/auth/idtoken`,
/// `POST /v1/auth/link`).
public struct SignInClient: Sendable, Equatable {
    /// The client's address as resolved through the trusted proxies.
    public var address: String
    /// The `User-Agent` header, at most 512 bytes.
    public var userAgent: String?

    /// A client at `address`.
    public init(address: String, userAgent: String?) {
        self.address = address
        self.userAgent = userAgent.map { $0.truncated(toBytes: 512) }
    }

    /// A client the gateway knows nothing about (tools, tests).
    public static let unknown = SignInClient(address: "unknown", userAgent: nil)
}

/// How a sign-in reached the account, as the hook is told it.
public enum SignInFlow: String, Sendable, Codable {
    /// The browser redirect flow (with its consent page for an app's return).
    case redirect
    /// `POST /v1/auth/idtoken`: an ID token obtained by the app.
    case idToken = "id-token"
    /// `POST /v1/auth/link`: a parked credential claimed by its account's owner.
    case pendingCredential = "pending-credential"
}

/// The body of a hook call: `{"type","id","timestamp","data"}`, the envelope of the
/// gateway's webhooks too. Never holds a provider token or a raw token.
public struct HookRequest: Sendable, Encodable {
    /// `before-create` or `before-sign-in`.
    public var type: HookEvent
    /// Unique per call (also the `webhook-id` header): `evt_…`.
    public var id: String
    /// When the call was made (RFC 3339).
    public var timestamp: Date
    /// The account, the provider's profile, its ID token's claims, the context.
    public var data: Payload

    /// The event's data.
    public struct Payload: Sendable, Encodable {
        /// The account as it is, or as it would be when new (`uid` `null`).
        public var account: Account
        /// The provider's normalized profile of this sign-in.
        public var profile: Profile
        /// The claims of the provider's ID token, where it sent one (OpenID providers,
        /// Microsoft, Yahoo); absent otherwise.
        public var idTokenClaims: [String: JSONValue]?
        /// Where the sign-in comes from.
        public var context: Context
    }

    /// The account part.
    public struct Account: Sendable, Encodable {
        /// The uid, `null` for an account not created yet.
        public var uid: String?
        /// The unified profile's email.
        public var email: String?
        /// Whether it is verified.
        public var emailVerified: Bool
        /// The unified profile's display name.
        public var displayName: String?
        /// The linked providers' ids (for a new account: the one signing in).
        public var providers: [String]
        /// The account's current custom claims (`{}` when none).
        public var customClaims: [String: JSONValue]
        /// Whether the account is created by this sign-in.
        public var isNew: Bool

        enum CodingKeys: String, CodingKey {
            case uid, email, emailVerified, displayName, providers, customClaims, isNew
        }

        /// Writes `uid`, `email` and `displayName` as `null` when absent (a strict receiver
        /// sees every member).
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(uid, forKey: .uid)
            try c.encode(email, forKey: .email)
            try c.encode(emailVerified, forKey: .emailVerified)
            try c.encode(displayName, forKey: .displayName)
            try c.encode(providers, forKey: .providers)
            try c.encode(customClaims, forKey: .customClaims)
            try c.encode(isNew, forKey: .isNew)
        }
    }

    /// The provider's normalized profile (no raw answer, no photo URL of the provider: the
    /// same members the unified profile shows for a provider).
    public struct Profile: Sendable, Encodable {
        /// `github.com`, `microsoft.com`, …
        public var providerId: String
        /// The provider's stable user id.
        public var federatedId: String
        /// The email the provider gives.
        public var email: String?
        /// Whether the provider vouches for it.
        public var emailVerified: Bool
        /// The display name.
        public var displayName: String?
        /// The given name.
        public var givenName: String?
        /// The family name.
        public var familyName: String?
        /// The user name (GitHub `login`).
        public var username: String?
        /// The directory tenant (Microsoft).
        public var tenantId: String?
        /// A BCP 47 locale.
        public var locale: String?

        /// The hook's view of `profile`.
        init(_ profile: ProviderProfile) {
            providerId = profile.providerId
            federatedId = profile.federatedId
            email = profile.email
            emailVerified = profile.emailCountsAsVerified
            displayName = profile.displayName
            givenName = profile.givenName
            familyName = profile.familyName
            username = profile.username
            tenantId = profile.tenantId
            locale = profile.locale
        }
    }

    /// The context part.
    public struct Context: Sendable, Encodable {
        /// The provider signed in with.
        public var providerId: String
        /// `signin`, `link` or `reauthenticate`.
        public var mode: SignInMode
        /// `redirect`, `id-token` or `pending-credential`.
        public var flow: SignInFlow
        /// The client's address (through the trusted proxies).
        public var clientAddress: String
        /// Its `User-Agent`.
        public var userAgent: String?
        /// The origin of `return_to` (`https://app.example.com`, `com.example.app:`), for the
        /// redirect flow; `null` otherwise.
        public var returnToOrigin: String?
        /// `web` or `native` (an app's scheme or loopback return); `null` when not known
        /// (an ID-token exchange, a claimed credential).
        public var platform: String?

        enum CodingKeys: String, CodingKey {
            case providerId, mode, flow, clientAddress, userAgent, returnToOrigin, platform
        }

        /// Writes absent members as `null`.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(providerId, forKey: .providerId)
            try c.encode(mode, forKey: .mode)
            try c.encode(flow, forKey: .flow)
            try c.encode(clientAddress, forKey: .clientAddress)
            try c.encode(userAgent, forKey: .userAgent)
            try c.encode(returnToOrigin, forKey: .returnToOrigin)
            try c.encode(platform, forKey: .platform)
        }
    }
}
