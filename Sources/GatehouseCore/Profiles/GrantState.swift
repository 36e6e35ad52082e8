import Foundation

/// What an operator needs to know of a linked provider's stored grant: whether calls with it
/// work, wait for a refresh, or need the user to consent again.
public struct GrantState: Sendable, Equatable {
    /// The grant's condition.
    public enum Condition: String, Sendable {
        /// The access token is valid (or does not expire, as GitHub's OAuth app tokens).
        case working
        /// The access token expired; the stored refresh token renews it at the next use.
        case refreshable = "expired, refreshed at the next use"
        /// The provider refused the refresh token: the user must sign in with it again.
        case reconsentNeeded = "refresh refused: the user must sign in with it again"
        /// The access token expired and there is no refresh token to renew it.
        case expired = "expired, no refresh token: the user must sign in with it again"
    }

    /// The provider.
    public var providerId: String
    /// The condition.
    public var condition: Condition
    /// When the access token expires (`nil`: it does not).
    public var expiresAt: Date?
    /// The scopes the provider granted.
    public var scopes: [String]

    /// The state of `tokens` at `now`.
    init(providerId: String, tokens: ProviderTokens, now: Date) {
        self.providerId = providerId
        scopes = tokens.scopes
        expiresAt = tokens.expiresAt.map(Date.init(timeIntervalSince1970:))
        if tokens.reauthRequired == true {
            condition = .reconsentNeeded
        } else if let expiresAt, expiresAt <= now {
            condition = tokens.refreshToken == nil ? .expired : .refreshable
        } else {
            condition = .working
        }
    }
}
