import Foundation

/// Accounts and their provider links: first sign-in creates the account, later ones update
/// the link's profile and (re-encrypted) tokens.
public struct AccountService: Sendable {
    let storage: any GatehouseStorage
    let vault: TokenVault
    let photoBaseURL: String

    /// What a sign-in did.
    public struct SignIn: Sendable {
        /// The account signed in to.
        public var account: AccountRecord
        /// Its unified profile after the sign-in.
        public var profile: UnifiedProfile
        /// Whether the account was created now.
        public var isNewUser: Bool
    }

    /// Finds the account linked to this identity or creates one. Two simultaneous first
    /// sign-ins of one identity cannot create two accounts: the database's uniqueness rule
    /// decides, and the loser retries as a returning user.
    public func signIn(profile: ProviderProfile, tokens: ProviderTokens) async throws -> SignIn {
        let now = Date()
        for _ in 0..<3 {
            if var link = try await storage.link(providerId: profile.providerId, federatedId: profile.federatedId) {
                guard var account = try await storage.account(uid: link.uid) else { break }
                if account.disabled { throw GatehouseError.userDisabled() }
                link.profileJSON = try JSONCoding.encoder().encode(profile)
                // An ID-token sign-in brings no access token: keep the grant of an earlier code flow.
                if !tokens.accessToken.isEmpty { link.sealedTokens = try seal(tokens, for: profile) }
                link.updatedAt = now
                try await storage.recordSignIn(link: link, at: now)
                account.lastSignInAt = now
                return SignIn(account: account, profile: try await unifiedProfile(for: account), isNewUser: false)
            }
            let account = AccountRecord(uid: Self.newUID(), createdAt: now, lastSignInAt: now)
            let link = ProviderLinkRecord(
                uid: account.uid, providerId: profile.providerId, federatedId: profile.federatedId,
                profileJSON: try JSONCoding.encoder().encode(profile), sealedTokens: try seal(tokens, for: profile), linkedAt: now,
                updatedAt: now)
            do {
                try await storage.createAccount(account, firstLink: link)
                return SignIn(account: account, profile: try await unifiedProfile(for: account), isNewUser: true)
            } catch StorageError.conflict {
                continue  // someone else created it a moment ago: sign in to theirs
            }
        }
        throw GatehouseError.internalError()
    }

    /// The unified profile of an account from its links' stored snapshots.
    public func unifiedProfile(for account: AccountRecord) async throws -> UnifiedProfile {
        let profiles = try await storage.links(uid: account.uid).compactMap { link in
            try? JSONCoding.decoder().decode(ProviderProfile.self, from: link.profileJSON)
        }
        return UnifiedProfile.build(account: account, profiles: profiles, photoBaseURL: photoBaseURL)
    }

    /// Seals tokens for a link; the identity is the associated data.
    func seal(_ tokens: ProviderTokens, for profile: ProviderProfile) throws -> String {
        try vault.seal(try JSONCoding.encoder().encode(tokens), context: Self.vaultContext(profile.providerId, profile.federatedId))
    }

    /// Opens a link's tokens.
    func tokens(of link: ProviderLinkRecord) throws -> ProviderTokens {
        let data = try vault.open(link.sealedTokens, context: Self.vaultContext(link.providerId, link.federatedId))
        return try JSONCoding.decoder().decode(ProviderTokens.self, from: data)
    }

    static func vaultContext(_ providerId: String, _ federatedId: String) -> String {
        "provider-tokens|\(providerId)|\(federatedId)"
    }

    /// 28 random base62-ish characters, like Firebase uids.
    static func newUID() -> String {
        String(SecureRandom.token(byteCount: 21).replacingOccurrences(of: "-", with: "").replacingOccurrences(of: "_", with: "").prefix(28))
    }
}
