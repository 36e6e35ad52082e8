import Foundation

/// The successor a refresh-token rotation stores, and what lets a retry of that same
/// rotation (its answer lost with the connection) get the same successor back.
public struct RefreshSuccessor: Sendable, Equatable {
    /// SHA-256 of the successor token.
    public var tokenHash: String
    /// The successor itself, sealed by the token vault, kept beside the spent token until
    /// `retryUntil` or until the successor is rotated in turn; `nil`: no retry window (strict).
    public var sealedToken: String?
    /// When presenting the spent token again stops returning the successor and starts
    /// revoking the family.
    public var retryUntil: Date
    /// The refresh as the session's last use, recorded in the rotation's transaction.
    public var use: SessionUse?
    /// The most refresh tokens the family may hold, spent ones included: a rotation of a
    /// family that holds as many stores nothing and ends its session
    /// (`RefreshRotation.exhausted`). Spent tokens stay while their session lives (a reuse
    /// of any of them revokes the family), so this bounds what one session keeps.
    public var familyLimit: Int

    /// Describes the successor.
    public init(tokenHash: String, sealedToken: String?, retryUntil: Date, use: SessionUse? = nil, familyLimit: Int) {
        self.tokenHash = tokenHash
        self.sealedToken = sealedToken
        self.retryUntil = retryUntil
        self.use = use
        self.familyLimit = familyLimit
    }
}

/// A one-time sign-in result as the store holds it (`GatehouseStorage.result(idHash:now:)`).
public enum StoredResultState: Sendable, Equatable {
    /// Not redeemed yet: the stored result.
    case pending(Data)
    /// Redeemed moments ago, inside the retry window, its refresh token still unused: the
    /// answer that redemption gave, sealed by the token vault.
    case redeemed(sealedAnswer: String)
}

/// What redeeming a one-time result stores in the same transaction
/// (`GatehouseStorage.takeResult(idHash:now:redemption:)`).
public struct ResultRedemption: Sendable, Equatable {
    /// The first refresh token of the session's family, if the result signs a session in.
    public var refreshToken: NewRefreshToken?
    /// The answer, sealed by the token vault, for a retry with the same verifier until
    /// `retryUntil`; `nil`: the result is deleted (no retry window).
    public var sealedAnswer: String?
    /// The end of the retry window.
    public var retryUntil: Date
    /// The family of the session the redemption replaces (a re-authentication's), ended in the
    /// same transaction: a redemption is never answered with the old session left alive.
    public var endsSession: String?

    /// Describes the redemption.
    public init(refreshToken: NewRefreshToken?, sealedAnswer: String?, retryUntil: Date, endsSession: String? = nil) {
        self.refreshToken = refreshToken
        self.sealedAnswer = sealedAnswer
        self.retryUntil = retryUntil
        self.endsSession = endsSession
    }
}
