import Foundation

/// The one profile shape every API answer uses (design §3).
public struct UnifiedProfile: Sendable, Codable, Equatable {
    /// One linked provider as the API shows it.
    public struct ProviderEntry: Sendable, Codable, Equatable {
        /// The provider id.
        public var providerId: String
        /// The provider's user id (Microsoft: `oid`).
        public var federatedId: String
        /// The provider user name (GitHub login, Microsoft UPN).
        public var username: String?
        /// The provider's display name.
        public var displayName: String?
        /// The provider's email.
        public var email: String?
        /// Whether the provider vouches for the email.
        public var emailVerified: Bool
        /// The gateway's photo route for this provider, never the provider's URL.
        public var photoURL: String?
        /// The user's public profile page.
        public var profileURL: String?
        /// The directory tenant (Microsoft).
        public var tenantId: String?
        /// The job title (Microsoft), or `nil`.
        public var jobTitle: String?
        /// The scopes the stored grant holds (what passthrough calls can use; widened by a
        /// `mode=reauthenticate` sign-in with `scope=…`).
        public var scopes: [String] = []

        /// Creates an entry.
        public init(
            providerId: String, federatedId: String, username: String? = nil, displayName: String? = nil, email: String? = nil,
            emailVerified: Bool, photoURL: String? = nil, profileURL: String? = nil, tenantId: String? = nil, jobTitle: String? = nil,
            scopes: [String] = []
        ) {
            self.providerId = providerId
            self.federatedId = federatedId
            self.username = username
            self.displayName = displayName
            self.email = email
            self.emailVerified = emailVerified
            self.photoURL = photoURL
            self.profileURL = profileURL
            self.tenantId = tenantId
            self.jobTitle = jobTitle
            self.scopes = scopes
        }

        private enum CodingKeys: String, CodingKey {
            case providerId, federatedId, username, displayName, email, emailVerified, photoURL, profileURL, tenantId, jobTitle, scopes
        }

        /// Decodes an entry; one stored before scopes were listed has none.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.init(
                providerId: try c.decode(String.self, forKey: .providerId), federatedId: try c.decode(String.self, forKey: .federatedId),
                username: try c.decodeIfPresent(String.self, forKey: .username),
                displayName: try c.decodeIfPresent(String.self, forKey: .displayName), email: try c.decodeIfPresent(String.self, forKey: .email),
                emailVerified: try c.decode(Bool.self, forKey: .emailVerified), photoURL: try c.decodeIfPresent(String.self, forKey: .photoURL),
                profileURL: try c.decodeIfPresent(String.self, forKey: .profileURL),
                tenantId: try c.decodeIfPresent(String.self, forKey: .tenantId), jobTitle: try c.decodeIfPresent(String.self, forKey: .jobTitle),
                scopes: try c.decodeIfPresent([String].self, forKey: .scopes) ?? [])
        }

        /// Encodes `nil` members as JSON `null`, so every key is always present.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(providerId, forKey: .providerId)
            try c.encode(federatedId, forKey: .federatedId)
            try c.encode(username, forKey: .username)
            try c.encode(displayName, forKey: .displayName)
            try c.encode(email, forKey: .email)
            try c.encode(emailVerified, forKey: .emailVerified)
            try c.encode(photoURL, forKey: .photoURL)
            try c.encode(profileURL, forKey: .profileURL)
            try c.encode(tenantId, forKey: .tenantId)
            try c.encode(jobTitle, forKey: .jobTitle)
            try c.encode(scopes, forKey: .scopes)
        }
    }

    /// The Gatehouse user id.
    public var uid: String
    /// The display name (first provider that has one).
    public var displayName: String?
    /// The given name.
    public var givenName: String?
    /// The family name.
    public var familyName: String?
    /// The first verified email, else the first unverified one.
    public var email: String?
    /// Whether `email` is verified by its provider.
    public var emailVerified: Bool
    /// The gateway's photo route, or `nil` when no provider has a photo.
    public var photoURL: String?
    /// A BCP 47 locale.
    public var locale: String?
    /// The linked providers, oldest link first.
    public var providers: [ProviderEntry]
    /// When the account was created.
    public var createdAt: Date
    /// The last successful sign-in.
    public var lastSignInAt: Date
    /// Disabled accounts cannot sign in.
    public var disabled: Bool
    /// The account's custom claims (`{}` when none): top-level claims of its ID tokens.
    public var customClaims: [String: JSONValue] = [:]

    private enum CodingKeys: String, CodingKey {
        case uid, displayName, givenName, familyName, email, emailVerified, photoURL, locale, providers, createdAt, lastSignInAt, disabled
        case customClaims
    }

    /// Creates a profile.
    public init(
        uid: String, displayName: String?, givenName: String?, familyName: String?, email: String?, emailVerified: Bool, photoURL: String?,
        locale: String?, providers: [ProviderEntry], createdAt: Date, lastSignInAt: Date, disabled: Bool, customClaims: [String: JSONValue] = [:]
    ) {
        self.uid = uid
        self.displayName = displayName
        self.givenName = givenName
        self.familyName = familyName
        self.email = email
        self.emailVerified = emailVerified
        self.photoURL = photoURL
        self.locale = locale
        self.providers = providers
        self.createdAt = createdAt
        self.lastSignInAt = lastSignInAt
        self.disabled = disabled
        self.customClaims = customClaims
    }

    /// Decodes a profile; one stored before custom claims existed has none.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            uid: try c.decode(String.self, forKey: .uid), displayName: try c.decodeIfPresent(String.self, forKey: .displayName),
            givenName: try c.decodeIfPresent(String.self, forKey: .givenName), familyName: try c.decodeIfPresent(String.self, forKey: .familyName),
            email: try c.decodeIfPresent(String.self, forKey: .email), emailVerified: try c.decode(Bool.self, forKey: .emailVerified),
            photoURL: try c.decodeIfPresent(String.self, forKey: .photoURL), locale: try c.decodeIfPresent(String.self, forKey: .locale),
            providers: try c.decode([ProviderEntry].self, forKey: .providers), createdAt: try c.decode(Date.self, forKey: .createdAt),
            lastSignInAt: try c.decode(Date.self, forKey: .lastSignInAt), disabled: try c.decode(Bool.self, forKey: .disabled),
            customClaims: try c.decodeIfPresent([String: JSONValue].self, forKey: .customClaims) ?? [:])
    }

    /// Encodes `nil` members as JSON `null`, so every key is always present.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(uid, forKey: .uid)
        try c.encode(displayName, forKey: .displayName)
        try c.encode(givenName, forKey: .givenName)
        try c.encode(familyName, forKey: .familyName)
        try c.encode(email, forKey: .email)
        try c.encode(emailVerified, forKey: .emailVerified)
        try c.encode(photoURL, forKey: .photoURL)
        try c.encode(locale, forKey: .locale)
        try c.encode(providers, forKey: .providers)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(lastSignInAt, forKey: .lastSignInAt)
        try c.encode(disabled, forKey: .disabled)
        try c.encode(customClaims, forKey: .customClaims)
    }

    /// Builds the unified profile from an account and its providers' profiles (oldest link first).
    ///
    /// The first provider with a value wins for names; the email is the first **verified**
    /// one, else the first unverified one shown with `emailVerified: false`. An address counts
    /// as verified only in a form one account per verified email holds it by
    /// (`EmailAddress.verified(of:)`): `octocat@github.com.` or `octocat @github.com`, which
    /// that rule never registers, is shown unverified, whatever its provider says.
    public static func build(account: AccountRecord, profiles: [ProviderProfile], photoBaseURL: String) -> UnifiedProfile {
        let verified = profiles.first(where: \.emailCountsAsVerified)
        let anyEmail = profiles.first { $0.email != nil }
        let hasPhoto = profiles.contains { $0.photoSourceURL != nil }
        return UnifiedProfile(
            uid: account.uid,
            displayName: profiles.lazy.compactMap(\.displayName).first,
            givenName: profiles.lazy.compactMap(\.givenName).first,
            familyName: profiles.lazy.compactMap(\.familyName).first,
            email: (verified ?? anyEmail)?.email,
            emailVerified: verified != nil,
            photoURL: hasPhoto ? photoBaseURL : nil,
            locale: profiles.lazy.compactMap(\.locale).first,
            providers: profiles.map { profile in
                ProviderEntry(
                    providerId: profile.providerId, federatedId: profile.federatedId, username: profile.username,
                    displayName: profile.displayName, email: profile.email, emailVerified: profile.emailCountsAsVerified,
                    photoURL: profile.photoSourceURL == nil ? nil : "\(photoBaseURL)?provider=\(FormEncoding.escape(profile.providerId))",
                    profileURL: profile.profileURL, tenantId: profile.tenantId, jobTitle: profile.jobTitle)
            },
            createdAt: account.createdAt,
            lastSignInAt: account.lastSignInAt,
            disabled: account.disabled,
            customClaims: account.customClaims == nil ? [:] : CustomClaims(stored: account.customClaims).members)
    }
}
