import Foundation

/// A code of the emulated Microsoft identity platform; kept after redemption so a second
/// redemption can answer AADSTS54005.
struct MicrosoftCode: Sendable {
    var clientID: String
    var redirectURI: String
    var userHint: String
    var scopes: [String]
    var nonce: String?
    var codeChallenge: String?
    var codeChallengeMethod: String
    var issuedAt: Date
    var redeemed: Bool
}

/// An access or refresh token of the emulated Microsoft.
struct MicrosoftToken: Sendable {
    var clientID: String
    var userHint: String
    var scopes: [String]
    var expired: Bool
    var revoked: Bool
}

/// Codes and tokens of the emulated Microsoft identity platform and Graph.
actor MicrosoftState {
    private var codes: [String: MicrosoftCode] = [:]
    private var accessTokens: [String: MicrosoftToken] = [:]
    private var refreshTokens: [String: MicrosoftToken] = [:]
    /// Request-body bytes the drive upload route has received so far, over every upload.
    private(set) var uploadedBytes = 0

    /// Counts bytes of an upload as they arrive.
    func received(uploadBytes count: Int) { uploadedBytes += count }

    func storeCode(_ code: String, _ issued: MicrosoftCode) { codes[code] = issued }

    /// The code and whether it had already been redeemed; marks it redeemed.
    func redeem(_ code: String) -> (code: MicrosoftCode, alreadyRedeemed: Bool)? {
        guard let found = codes[code] else { return nil }
        codes[code]?.redeemed = true
        return (found, found.redeemed)
    }

    func issueAccess(_ token: String, _ record: MicrosoftToken) { accessTokens[token] = record }
    func issueRefresh(_ token: String, _ record: MicrosoftToken) { refreshTokens[token] = record }

    func access(_ token: String) -> MicrosoftToken? { accessTokens[token] }

    /// A refresh token that still works. Using it does not revoke it: the identity platform
    /// answers a new one each time, and the one presented keeps working until it expires or is
    /// revoked ("Refresh tokens aren't revoked when used to acquire new access tokens").
    func liveRefresh(_ token: String) -> MicrosoftToken? {
        guard let record = refreshTokens[token], !record.revoked, !record.expired else { return nil }
        return record
    }

    /// Expires every access token (`POST /_emulator/expire-tokens`).
    func expireAccessTokens() -> Int {
        for key in accessTokens.keys { accessTokens[key]?.expired = true }
        return accessTokens.count
    }

    /// Revokes every refresh token (`POST /_emulator/microsoft/revoke-refresh-tokens`).
    func revokeRefreshTokens() -> Int {
        for key in refreshTokens.keys { refreshTokens[key]?.revoked = true }
        return refreshTokens.count
    }

    func issuedTokens() -> [String] { Array(accessTokens.keys) + Array(refreshTokens.keys) }
}
