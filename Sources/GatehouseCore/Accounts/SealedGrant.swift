import Foundation

/// The grant a sign-in brings to a link, and whether it replaces the one stored.
extension AccountService {
    /// Provider tokens sealed for a link, whether they hold no grant (an ID-token sign-in
    /// brings no access token), and when the provider issued them.
    struct SealedGrant {
        /// The sealed tokens.
        var sealed: String
        /// No access token in them.
        var isEmpty: Bool
        /// When they were obtained: for a pending credential's, when it was parked; a flow's
        /// own are newer than anything stored (`distantFuture`).
        var obtainedAt: Date

        /// Whether these tokens are to replace the ones `link` holds: never when they hold no
        /// grant, nor when the link was written after they were obtained (a pending credential
        /// claimed after its identity was linked anew: the link's grant is the newer one; at the
        /// same instant, the link's). The link's `updatedAt` also moves on a write that keeps
        /// its tokens (a live profile, an ID-token sign-in), which then counts as newer too: a
        /// grant the link already holds is never given up for an older one.
        func replaces(_ link: ProviderLinkRecord) -> Bool {
            !isEmpty && link.updatedAt < obtainedAt
        }
    }

    /// Whether a pending credential holds no grant: parked by an ID-token sign-in (no access
    /// token), or sealed under a key since removed (its tokens no longer open). A store
    /// failure while the key ring is read is thrown, not taken for either.
    func holdsNoGrant(_ pending: PendingCredentialRecord) async throws -> Bool {
        do {
            return try await vault.tokens(sealed: pending.sealedTokens, providerId: pending.providerId, federatedId: pending.federatedId)
                .accessToken.isEmpty
        } catch TokenVault.VaultError.unreadable {
            return true
        } catch is DecodingError {
            return true
        }
    }
}
