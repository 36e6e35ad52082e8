import Foundation
import GatehouseCore

/// Records with whole-second dates (every backend stores at least millisecond precision).
enum Fixtures {
    /// A fixed "now".
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func transaction(state: String = "state", binding: String = "binding", expiresIn: TimeInterval = 600) -> SignInTransaction {
        SignInTransaction(
            stateHash: SecureRandom.digest(state), bindingHash: SecureRandom.digest(binding), providerId: "github.com",
            codeVerifier: "verifier-\(state)", nonce: "nonce-\(state)", returnTo: "https://app.example/", mode: .link,
            redirectURI: "http://127.0.0.1/v1/auth/github.com/callback", providerContext: "tenant-\(state)", uid: "u-\(state)",
            sessionFamilyId: "family-\(state)", createdAt: now,
            expiresAt: now.addingTimeInterval(expiresIn), resultChallenge: "challenge-\(state)")
    }

    static func account(_ uid: String, at date: Date = now) -> AccountRecord {
        AccountRecord(uid: uid, createdAt: date, lastSignInAt: date)
    }

    static func link(_ uid: String, provider: String = "github.com", federatedId: String, at date: Date = now, tokens: String = "v1.k.sealed")
        -> ProviderLinkRecord
    {
        ProviderLinkRecord(
            uid: uid, providerId: provider, federatedId: federatedId, profileJSON: Data(#"{"federatedId":"\#(federatedId)"}"#.utf8),
            sealedTokens: tokens, linkedAt: date, updatedAt: date)
    }

    static func session(_ id: String, uid: String, expiresIn: TimeInterval = 3600) -> SessionRecord {
        SessionRecord(
            idHash: SecureRandom.digest(id), uid: uid, createdAt: now, expiresAt: now.addingTimeInterval(expiresIn), familyId: "family-\(id)",
            signInProvider: "github.com")
    }

    static func pending(_ hash: String, target: String, expiresIn: TimeInterval = 600) -> PendingCredentialRecord {
        PendingCredentialRecord(
            tokenHash: hash, targetUid: target, providerId: "oidc.x", federatedId: "f-\(hash)", profileJSON: Data(#"{"a":1}"#.utf8),
            sealedTokens: "v1.k.s", verifiedEmail: "pat@example.com", expiresAt: Fixtures.now.addingTimeInterval(expiresIn))
    }
}

extension ResultRedemption {
    /// A redemption that deletes the result (no retry window).
    static func deleting(_ token: NewRefreshToken?) -> ResultRedemption {
        ResultRedemption(refreshToken: token, sealedAnswer: nil, retryUntil: Fixtures.now)
    }

    /// A redemption that keeps `answer` for a 10-second retry window from `Fixtures.now`.
    static func keeping(_ token: NewRefreshToken?, answer: String) -> ResultRedemption {
        ResultRedemption(refreshToken: token, sealedAnswer: answer, retryUntil: Fixtures.now.addingTimeInterval(10))
    }
}

extension RefreshSuccessor {
    /// A successor kept (as `sealed-<hash>`) for a 10-second retry window from `Fixtures.now`.
    static func kept(_ hash: String) -> RefreshSuccessor {
        RefreshSuccessor(tokenHash: hash, sealedToken: "sealed-\(hash)", retryUntil: Fixtures.now.addingTimeInterval(10), familyLimit: .max)
    }

    /// A successor with no retry window.
    static func strict(_ hash: String) -> RefreshSuccessor {
        RefreshSuccessor(tokenHash: hash, sealedToken: nil, retryUntil: Fixtures.now, familyLimit: .max)
    }
}
