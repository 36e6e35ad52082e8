import Foundation

extension TokenVault {
    /// Seals a link's provider tokens; the identity (`providerId`, `federatedId`) is the
    /// associated data, so sealed tokens copied onto another link do not open.
    func seal(_ tokens: ProviderTokens, providerId: String, federatedId: String) async throws -> String {
        try await seal(try JSONCoding.encoder().encode(tokens), context: Self.providerTokensContext(providerId, federatedId))
    }

    /// The provider tokens of a link.
    func tokens(of link: ProviderLinkRecord) async throws -> ProviderTokens {
        let data = try await open(link.sealedTokens, context: Self.providerTokensContext(link.providerId, link.federatedId))
        return try JSONCoding.decoder().decode(ProviderTokens.self, from: data)
    }

    /// The associated data of a link's sealed tokens.
    static func providerTokensContext(_ providerId: String, _ federatedId: String) -> String {
        "provider-tokens|\(providerId)|\(federatedId)"
    }
}
