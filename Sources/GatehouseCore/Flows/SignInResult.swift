/// What `POST /v1/auth/result` answers after a successful sign-in.
public struct SignInResult: Sendable, Codable, Equatable {
    /// Provider details Firebase calls `additionalUserInfo`.
    public struct AdditionalUserInfo: Sendable, Codable, Equatable {
        /// The provider's raw user info.
        public var profile: JSONValue
        /// The provider user name (GitHub `login`), or `null`.
        public var username: String?

        /// Encodes `username` as `null` when absent.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(profile, forKey: .profile)
            try c.encode(username, forKey: .username)
        }
    }

    /// The unified profile after the sign-in.
    public var user: UnifiedProfile
    /// Whether this sign-in created the account.
    public var isNewUser: Bool
    /// The provider used.
    public var providerId: String
    /// Provider details.
    public var additionalUserInfo: AdditionalUserInfo
}

/// A stored one-time result: the success or the problem the caller should see.
enum StoredResult: Codable {
    case success(SignInResult)
    case failure(GatehouseError)
}
