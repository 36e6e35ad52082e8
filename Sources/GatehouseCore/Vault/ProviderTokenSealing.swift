import Foundation

extension TokenVault {
    /// Seals a link's provider tokens; the identity (`providerId`, `federatedId`) is the
    /// associated data, so sealed tokens copied onto another link do not open.
    func seal(_ tokens: ProviderTokens, providerId: String, federatedId: String) async throws -> String {
        try await seal(try JSONCoding.encoder().encode(tokens), context: Self.providerTokensContext(providerId, federatedId))
    }

    /// The provider tokens of a link.
    func tokens(of link: ProviderLinkRecord) async throws -> ProviderTokens {
        try await tokens(sealed: link.sealedTokens, providerId: link.providerId, federatedId: link.federatedId)
    }

    /// Provider tokens sealed for the identity (`providerId`, `federatedId`).
    func tokens(sealed: String, providerId: String, federatedId: String) async throws -> ProviderTokens {
        let data = try await open(sealed, context: Self.providerTokensContext(providerId, federatedId))
        return try JSONCoding.decoder().decode(ProviderTokens.self, from: data)
    }

    /// The associated data of a link's sealed tokens.
    static func providerTokensContext(_ providerId: String, _ federatedId: String) -> String {
        "provider-tokens|\(providerId)|\(federatedId)"
    }
}
