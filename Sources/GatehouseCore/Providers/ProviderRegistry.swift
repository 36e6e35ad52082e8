/// The configured providers by id.
public struct ProviderRegistry: Sendable {
    private let byID: [String: any IdentityProvider]

    /// Creates a registry.
    public init(_ providers: [any IdentityProvider]) {
        byID = Dictionary(providers.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The provider with this id, or `unknown-provider`.
    public func provider(_ id: String) throws -> any IdentityProvider {
        guard let provider = byID[id] else { throw GatehouseError.unknownProvider(id) }
        return provider
    }

    /// The configured provider ids, sorted.
    public var ids: [String] { byID.keys.sorted() }
}
