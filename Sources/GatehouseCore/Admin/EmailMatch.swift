/// An account found by email (`GET /v1/users?email=`), and whether a provider vouches for
/// the address on it.
public struct EmailMatch: Sendable, Encodable {
    /// The account's unified profile.
    public var profile: UnifiedProfile
    /// `true` when a linked provider verified the address; `false` when one merely claims it.
    public var verified: Bool

    /// Pairs a profile with how its email matched.
    public init(profile: UnifiedProfile, verified: Bool) {
        self.profile = profile
        self.verified = verified
    }

    private enum CodingKeys: String, CodingKey {
        case emailMatch
    }

    /// The profile's members plus `emailMatch`: `verified` or `unverified`.
    public func encode(to encoder: any Encoder) throws {
        try profile.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(verified ? "verified" : "unverified", forKey: .emailMatch)
    }
}
