import Foundation

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
    /// `signIn`, `link` or `reauthenticate` (Firebase's `operationType`).
    public var operationType: String
    /// The gateway ID token, when the operation started a session (not for `link`).
    public var idToken: String?
    /// The refresh token of that session's family.
    public var refreshToken: String?
    /// Seconds the ID token lives.
    public var expiresIn: Int?

    /// The same result with the session's tokens.
    func with(_ tokens: GatewayTokenService.Issued?) -> Self {
        var copy = self
        copy.idToken = tokens?.idToken
        copy.refreshToken = tokens?.refreshToken
        copy.expiresIn = tokens?.expiresIn
        return copy
    }
}

/// A stored one-time result: the success (with the session family whose tokens are minted
/// when the result is fetched, so no token ever rests in the database) or the problem.
enum StoredResult: Codable {
    /// A success as stored before the answer was kept encoded; decoded only (a result pending
    /// across an upgrade still redeems).
    case success(SignInResult, familyId: String?)
    /// A success: the answer's JSON without the session's tokens (`SignInResult.tokenlessAnswer`),
    /// which are added when it is fetched. Encoded once at the callback instead of being decoded
    /// and encoded again at the fetch (a sixth of a sign-in's CPU). `replaces`: the session
    /// of the app that started a re-authentication, ended once the app redeems this one
    /// (absent from results stored before it was kept: optional members decode as missing).
    case answer(Data, familyId: String?, replaces: String?)
    case failure(GatehouseError)
    /// A link from an app's start URL the user continued on the consent page: the held sign-in
    /// (`PendingConsent`, sealed by the token vault and bound to the result's key), written
    /// when the app redeems the result with its verifier. The start URL is a bearer credential
    /// for adding an identity to its account; whoever opened it first could otherwise add their
    /// own identity by answering the page themselves.
    case heldLink(sealed: String)
}

extension SignInResult {
    /// The answer's JSON without the session's tokens: what the callback stores.
    func tokenlessAnswer() throws -> Data {
        try JSONCoding.encoder().encode(with(nil))
    }

    /// A stored tokenless answer with the session's tokens: their members, then the stored
    /// ones. The stored answer has none of the three (`tokenlessAnswer`), so no key repeats;
    /// the members are not sorted across the two parts, which JSON does not ask for.
    static func answer(_ tokenless: Data, adding tokens: GatewayTokenService.Issued?) throws -> Data {
        guard let tokens else { return tokenless }
        var answer = try JSONCoding.encoder().encode(tokens)
        guard answer.last == UInt8(ascii: "}"), tokenless.first == UInt8(ascii: "{"), tokenless.count >= 2 else {
            throw GatehouseError.internalError()
        }
        answer.removeLast()
        if tokenless.count > 2 { answer.append(UInt8(ascii: ",")) }
        answer.append(tokenless.dropFirst())
        return answer
    }
}
