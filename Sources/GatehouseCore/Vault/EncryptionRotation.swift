import Foundation

/// Re-encrypts every stored provider token under the vault's current key, in batches, while
/// the gateway keeps serving: every instance is configured with the new key first and the
/// old ones as previous keys, so tokens are readable throughout; once a run reports nothing
/// left under an old key, that key can be removed from the configuration.
public struct EncryptionRotation: Sendable {
    /// The store whose links are re-encrypted.
    let storage: any GatehouseStorage
    /// The current key first, the previous ones after it.
    let vault: TokenVault

    /// A rotation over `storage` with `vault` (the current key first).
    public init(storage: any GatehouseStorage, vault: TokenVault) {
        self.storage = storage
        self.vault = vault
    }

    /// What a run did.
    public struct Report: Sendable, Equatable {
        /// Links looked at.
        public var scanned = 0
        /// Links re-encrypted under the current key.
        public var resealed = 0
        /// Links already under the current key.
        public var alreadyCurrent = 0
        /// Links whose tokens changed during the run (a refresh stored new ones, sealed with
        /// the current key): left as they are.
        public var changedMeanwhile = 0
        /// Links no configured key opens (their users must sign in again).
        public var unreadable = 0
    }

    /// Walks all links in pages of `batchSize`; each link is one compare-and-set update.
    public func run(batchSize: Int = 200) async throws -> Report {
        var report = Report()
        var cursor: LinkCursor?
        while true {
            let page = try await storage.links(after: cursor, limit: max(1, batchSize))
            for link in page {
                report.scanned += 1
                if vault.isCurrent(link.sealedTokens) {
                    report.alreadyCurrent += 1
                    continue
                }
                let context = AccountService.vaultContext(link.providerId, link.federatedId)
                guard let plaintext = try? vault.open(link.sealedTokens, context: context) else {
                    report.unreadable += 1
                    continue
                }
                let resealed = try vault.seal(plaintext, context: context)
                if try await storage.replaceSealedTokens(
                    providerId: link.providerId, federatedId: link.federatedId, expected: link.sealedTokens, with: resealed)
                {
                    report.resealed += 1
                } else {
                    report.changedMeanwhile += 1
                }
            }
            guard let last = page.last, page.count == max(1, batchSize) else { return report }
            cursor = LinkCursor(providerId: last.providerId, federatedId: last.federatedId)
        }
    }
}
