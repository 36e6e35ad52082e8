import Crypto
import Foundation

/// The signed-in user's profile routes: unified profile, one provider's live profile, photo.
public struct ProfileService: Sendable {
    let storage: any GatehouseStorage
    let providers: ProviderRegistry
    let accounts: AccountService

    /// A photo ready to serve, with a strong `ETag` computed from its bytes.
    public struct Photo: Sendable {
        /// The image bytes.
        public var bytes: [UInt8]
        /// The provider's image content type.
        public var contentType: String
        /// `"<sha256 of the bytes>"`: equal bytes, equal tag.
        public var etag: String
    }

    /// The unified profile of an enabled account.
    public func me(uid: String) async throws -> UnifiedProfile {
        try await accounts.unifiedProfile(for: try await enabledAccount(uid))
    }

    /// The provider's profile fetched live with the stored token; the snapshot is updated.
    public func providerProfile(uid: String, providerId: String) async throws -> ProviderProfile {
        _ = try await enabledAccount(uid)
        var link = try await link(uid: uid, providerId: providerId)
        let provider = try providers.provider(providerId)
        let tokens = try openTokens(link)
        let profile = try await provider.fetchProfile(tokens: tokens)
        guard profile.federatedId == link.federatedId else {
            throw GatehouseError.providerReauthRequired(providerId)
        }
        link.profileJSON = try JSONCoding.encoder().encode(profile)
        link.updatedAt = Date()
        try await storage.updateLink(link)
        return profile
    }

    /// The photo of the given provider, or of the first linked provider that has one.
    public func photo(uid: String, providerId: String?, size: Int?) async throws -> Photo {
        _ = try await enabledAccount(uid)
        let links = try await storage.links(uid: uid)
        let candidates = providerId.map { id in links.filter { $0.providerId == id } } ?? links
        if let providerId, candidates.isEmpty { throw GatehouseError.providerNotLinked(providerId) }
        for link in candidates {
            guard let profile = try? JSONCoding.decoder().decode(ProviderProfile.self, from: link.profileJSON), profile.photoSourceURL != nil
            else { continue }
            let provider = try providers.provider(link.providerId)
            let photo = try await provider.fetchPhoto(profile: profile, tokens: try openTokens(link), size: size)
            let digest = SHA256.hash(data: photo.bytes).map { String(format: "%02x", $0) }.joined()
            return Photo(bytes: photo.bytes, contentType: photo.contentType, etag: "\"\(digest)\"")
        }
        throw GatehouseError.noPhoto()
    }

    private func enabledAccount(_ uid: String) async throws -> AccountRecord {
        guard let account = try await storage.account(uid: uid) else { throw GatehouseError.userNotFound() }
        if account.disabled { throw GatehouseError.userDisabled() }
        return account
    }

    private func link(uid: String, providerId: String) async throws -> ProviderLinkRecord {
        guard let link = try await storage.links(uid: uid).first(where: { $0.providerId == providerId }) else {
            _ = try providers.provider(providerId)
            throw GatehouseError.providerNotLinked(providerId)
        }
        return link
    }

    /// A link whose tokens no longer open (a removed key) needs a new sign-in, not a 500.
    private func openTokens(_ link: ProviderLinkRecord) throws -> ProviderTokens {
        do {
            return try accounts.tokens(of: link)
        } catch {
            throw GatehouseError.providerReauthRequired(link.providerId)
        }
    }
}
