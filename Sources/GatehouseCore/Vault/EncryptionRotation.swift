import Foundation

/// Moves every stored secret to a new data key while the gateway keeps serving.
///
/// A run (1) re-wraps the data keys under the current configured key, so a configured key
/// that was replaced can be removed; (2) stores a new data key and waits two reload
/// intervals, by when every instance has loaded it and seals with it; (3) re-encrypts the
/// links' provider tokens page by page and the signing keys, each with a compare-and-set (a
/// refresh that stores new tokens meanwhile wins); (4) deletes old data keys nothing uses
/// any more. Pending credentials are not re-encrypted: they expire within minutes, and a
/// later run retires the key they kept alive. What retry windows keep (a spent refresh
/// token's successor, a redeemed result's answer) lives seconds: the wait in (2) lasts one
/// retry window longer, so none sealed with an older key is left when (4) runs.
public struct EncryptionRotation: Sendable {
    /// The store whose secrets are re-encrypted.
    let storage: any GatehouseStorage
    /// The configured keys (current first) and the instances' reload interval.
    let vault: TokenVault
    /// The instances' retry window (`GatewayConfiguration.refreshRetryWindow`).
    let retryWindow: TimeInterval

    /// A rotation over `storage` with `vault` (the current configured key first; its
    /// `reloadInterval` must be the running instances', and `retryWindow` theirs too).
    public init(storage: any GatehouseStorage, vault: TokenVault, retryWindow: TimeInterval) {
        self.storage = storage
        self.vault = vault
        self.retryWindow = retryWindow
    }

    /// What a run did.
    public struct Report: Sendable, Equatable {
        /// Data keys re-wrapped under the current configured key.
        public var rewrappedDataKeys = 0
        /// Data keys no configured key opens (values sealed with them are lost).
        public var unreadableDataKeys = 0
        /// The data key this run added, if it added one.
        public var newDataKeyID: String?
        /// Links looked at.
        public var scanned = 0
        /// Links re-encrypted under the current key.
        public var resealed = 0
        /// Links already under the current key.
        public var alreadyCurrent = 0
        /// Links whose tokens changed during the run (a refresh stored new ones, sealed with
        /// the current key): left as they are.
        public var changedMeanwhile = 0
        /// Links no configured or data key opens (their users must sign in again).
        public var unreadable = 0
        /// Signing keys re-encrypted under the current key.
        public var resealedSigningKeys = 0
        /// Old data keys deleted because nothing uses them any more.
        public var retiredDataKeys: [String] = []
        /// Values still under another key than the current one, by key label (`v2.<id>`,
        /// `v1.<configured key id>`): pending credentials until they expire, links that
        /// changed meanwhile, or (without a new data key) what retry windows keep. Empty means every older key may go.
        public var remaining: [String: Int] = [:]
    }

    /// Runs the rotation; `newDataKey: false` only finishes an earlier one (re-encrypts what
    /// is left under the current data key, retires unused keys) without waiting.
    public func run(batchSize: Int = 200, newDataKey: Bool = true) async throws -> Report {
        var report = Report()
        try await vault.reload()
        for record in try await storage.dataKeys() where !vault.isWrappedByCurrentKey(record) {
            guard let wrapped = try? vault.rewrap(record) else {
                report.unreadableDataKeys += 1
                continue
            }
            if try await storage.replaceWrappedDataKey(id: record.id, expected: record.wrappedKey, with: wrapped) { report.rewrappedDataKeys += 1 }
        }
        if newDataKey {
            let key = try vault.newDataKey()
            try await storage.insertDataKey(key)
            report.newDataKeyID = key.id
            // Every instance rereads its data keys within one interval; the second covers
            // clocks that differ. After that the new key seals everywhere, and one retry
            // window later nothing sealed before is kept for a retry any more.
            try await Task.sleep(for: .seconds(2 * vault.reloadInterval + retryWindow))
        }
        try await vault.reload()
        try await resealLinks(batchSize: batchSize, into: &report)
        try await resealSigningKeys(into: &report)

        let usage = try await storage.sealingKeyUsage(now: Date())
        for record in try await storage.dataKeys() where record.id != vault.sealingDataKeyID && usage["v2.\(record.id)", default: 0] == 0 {
            if try await storage.deleteDataKey(id: record.id) { report.retiredDataKeys.append(record.id) }
        }
        report.remaining = usage.filter { $0.key != vault.currentLabel }
        return report
    }

    /// Walks all links in pages of `batchSize`; each link is one compare-and-set update.
    private func resealLinks(batchSize: Int, into report: inout Report) async throws {
        var cursor: LinkCursor?
        while true {
            let page = try await storage.links(after: cursor, limit: max(1, batchSize))
            for link in page {
                report.scanned += 1
                if vault.isCurrent(link.sealedTokens) {
                    report.alreadyCurrent += 1
                    continue
                }
                let context = TokenVault.providerTokensContext(link.providerId, link.federatedId)
                let plaintext: Data
                do {
                    plaintext = try await vault.open(link.sealedTokens, context: context)
                } catch TokenVault.VaultError.unreadable {
                    report.unreadable += 1
                    continue
                }
                let resealed = try await vault.seal(plaintext, context: context)
                if try await storage.replaceSealedTokens(
                    providerId: link.providerId, federatedId: link.federatedId, expected: link.sealedTokens, with: resealed)
                {
                    report.resealed += 1
                } else {
                    report.changedMeanwhile += 1
                }
            }
            guard let last = page.last, page.count == max(1, batchSize) else { return }
            cursor = LinkCursor(providerId: last.providerId, federatedId: last.federatedId)
        }
    }

    /// Re-encrypts the gateway's signing keys (one or a few rows).
    private func resealSigningKeys(into report: inout Report) async throws {
        for record in try await storage.signingKeys() where !vault.isCurrent(record.sealedPrivateKey) {
            let context = SigningKeyRing.vaultContext(record.kid)
            let plaintext: Data
            do {
                plaintext = try await vault.open(record.sealedPrivateKey, context: context)
            } catch TokenVault.VaultError.unreadable {
                // Skipped by every instance already; leave it.
                continue
            }
            if try await storage.replaceSealedSigningKey(
                kid: record.kid, expected: record.sealedPrivateKey, with: try await vault.seal(plaintext, context: context))
            {
                report.resealedSigningKeys += 1
            }
        }
    }
}
