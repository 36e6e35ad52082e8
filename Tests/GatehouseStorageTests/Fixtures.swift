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
            redirectURI: "http://127.0.0.1/v1/auth/github.com/callback", providerContext: "tenant-\(state)", uid: "u-\(state)", createdAt: now,
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
}
