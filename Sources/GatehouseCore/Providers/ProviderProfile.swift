/// A provider's view of the user, normalized. Stored with the link (the last sign-in's
/// snapshot) and refreshed by live profile calls.
public struct ProviderProfile: Sendable, Codable, Equatable {
    /// The provider id.
    public var providerId: String
    /// The provider's stable user id (GitHub's numeric `id` as a string).
    public var federatedId: String
    /// The provider user name (GitHub `login`).
    public var username: String?
    /// The display name.
    public var displayName: String?
    /// The given name.
    public var givenName: String?
    /// The family name.
    public var familyName: String?
    /// The email address, or `nil` when the provider has none worth showing.
    public var email: String?
    /// Whether the provider vouches for `email` (GitHub: a primary verified `/user/emails` entry).
    public var emailVerified: Bool
    /// The provider's photo URL. Internal: the API only exposes the gateway's photo route.
    public var photoSourceURL: String?
    /// The user's public profile page.
    public var profileURL: String?
    /// The directory tenant (Microsoft); `nil` elsewhere.
    public var tenantId: String?
    /// A BCP 47 locale, when the provider has one.
    public var locale: String?
    /// The job title (Microsoft Graph), when the provider has one.
    public var jobTitle: String?
    /// The provider's own answer, unchanged.
    public var rawUserInfo: JSONValue
    /// The validators (`ETag`) of the answers this profile was made from, by endpoint
    /// (`/user`, `/user/emails`): sent back as `If-None-Match` on the next live read, so an
    /// unchanged profile costs a `304` (which GitHub does not count against its rate limit).
    /// Stored with the snapshot; never shown.
    public var validators: [String: String]?

    /// Creates a profile.
    public init(
        providerId: String, federatedId: String, username: String? = nil, displayName: String? = nil, givenName: String? = nil,
        familyName: String? = nil, email: String? = nil, emailVerified: Bool = false, photoSourceURL: String? = nil,
        profileURL: String? = nil, tenantId: String? = nil, locale: String? = nil, jobTitle: String? = nil, rawUserInfo: JSONValue = .null,
        validators: [String: String]? = nil
    ) {
        self.validators = validators
        self.providerId = providerId
        self.federatedId = federatedId
        self.username = username
        self.displayName = displayName
        self.givenName = givenName
        self.familyName = familyName
        self.email = email
        self.emailVerified = emailVerified
        self.photoSourceURL = photoSourceURL
        self.profileURL = profileURL
        self.tenantId = tenantId
        self.locale = locale
        self.jobTitle = jobTitle
        self.rawUserInfo = rawUserInfo
    }
}

extension ProviderProfile {
    /// Whether the address counts as verified wherever the gateway says so (the unified
    /// profile, its ID token, hooks, the live profile, a link's confirmation): the provider
    /// vouches for it, in a form one account per verified email can hold it by
    /// (`EmailAddress.verified(of:)`). `octocat@github.com.` or `octocat @github.com`, which that
    /// rule never registers, does not count, whatever its provider says: an app that normalizes
    /// addresses more loosely could take it for another.
    public var emailCountsAsVerified: Bool { EmailAddress.verified(of: self) != nil }

    /// About how many bytes of memory the profile holds (`JSONValue.approximateBytes`): its
    /// raw answer, its text fields and validators, and 256 for the rest.
    public var approximateBytes: Int {
        let texts = [
            providerId, federatedId, username, displayName, givenName, familyName, email, photoSourceURL, profileURL, tenantId, locale, jobTitle,
        ]
        let textBytes = texts.reduce(0) { $0 + ($1?.utf8.count ?? 0) }
        let validatorBytes = validators?.reduce(0) { $0 + 32 + $1.key.utf8.count + $1.value.utf8.count } ?? 0
        return 256 + textBytes + validatorBytes + rawUserInfo.approximateBytes
    }
}
