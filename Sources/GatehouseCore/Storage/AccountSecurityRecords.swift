import Foundation

/// A provider credential that could not be used when it was obtained and waits, server side,
/// for the owner of `targetUid` to claim it with `POST /v1/auth/link` (Firebase's "pending
/// credential"). Keyed by the SHA-256 of the `pendingToken` handed to the caller; single use.
public struct PendingCredentialRecord: Sendable, Equatable {
    /// SHA-256 hex of the pending token.
    public var tokenHash: String
    /// The account that must be signed in to claim it.
    public var targetUid: String
    /// The identity's provider.
    public var providerId: String
    /// The identity's provider user id.
    public var federatedId: String
    /// The identity's normalized profile, as JSON.
    public var profileJSON: Data
    /// The provider tokens, sealed by the token vault.
    public var sealedTokens: String
    /// The normalized verified email, if the profile has one.
    public var verifiedEmail: String?
    /// When the credential stops being claimable.
    public var expiresAt: Date

    /// Creates a record.
    public init(
        tokenHash: String, targetUid: String, providerId: String, federatedId: String, profileJSON: Data, sealedTokens: String,
        verifiedEmail: String?, expiresAt: Date
    ) {
        self.tokenHash = tokenHash
        self.targetUid = targetUid
        self.providerId = providerId
        self.federatedId = federatedId
        self.profileJSON = profileJSON
        self.sealedTokens = sealedTokens
        self.verifiedEmail = verifiedEmail
        self.expiresAt = expiresAt
    }
}

/// What rotating a refresh token found (`GatehouseStorage.rotateRefreshToken`).
public enum RefreshRotation: Sendable, Equatable {
    /// The token was live: it is now spent, its successor stored; the family's session.
    case rotated(SessionRecord)
    /// The token was spent moments ago and its successor is still unused and inside the
    /// retry window: the rotation is not repeated; the same successor, sealed as it was stored.
    case retried(SessionRecord, sealedSuccessor: String)
    /// The token had already been spent (outside the retry window): its whole family (the
    /// session), `familyId`, was revoked.
    case reused(familyId: String)
    /// The token was live, but its family already holds `RefreshSuccessor.familyLimit`
    /// tokens: nothing was rotated and the family's session (returned) was ended.
    case exhausted(SessionRecord)
    /// No live family knows this token (never issued, expired, or revoked).
    case unknown
}

/// One of the gateway's ES256 signing keys. The private key is sealed by the token vault;
/// the newest key signs, older ones stay published while tokens they signed may live.
public struct SigningKeyRecord: Sendable, Equatable {
    /// The key id (`kid`).
    public var kid: String
    /// The private key (raw P-256 scalar), sealed by the token vault with the kid as context.
    public var sealedPrivateKey: String
    /// When the key was created; the newest one signs.
    public var createdAt: Date

    /// Creates a record.
    public init(kid: String, sealedPrivateKey: String, createdAt: Date) {
        self.kid = kid
        self.sealedPrivateKey = sealedPrivateKey
        self.createdAt = createdAt
    }
}

/// What `AccountStore.setDisabled` did: a flag set to the value it already had changes
/// nothing, so it records no event (`OutboxOutcome`) and no audit line.
public enum FlagChange: Sendable, Equatable {
    /// The flag now has the value asked for, and had the other one.
    case changed
    /// The flag already had the value asked for.
    case unchanged
    /// There is no such account.
    case notFound
}

/// What `GatehouseStorage.deleteLink` did.
public enum UnlinkOutcome: Sendable, Equatable {
    /// The link is gone; here is what it held (its tokens may still need revoking).
    case deleted(ProviderLinkRecord)
    /// The account has no link to that provider.
    case notLinked
    /// It is the account's last link: an account without a sign-in method cannot be used.
    case lastLink
}
