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

    /// Each provider's readiness problem, by id (`IdentityProvider.readinessProblem(within:)`),
    /// the providers asked all at once: a cold cache fetches each discovery document, and one
    /// after the other the probe would take the sum of their waits.
    public func readinessProblems(within limit: Duration) async -> [String: String] {
        await withTaskGroup(of: (String, String?).self) { group in
            for (id, provider) in byID {
                group.addTask { (id, await provider.readinessProblem(within: limit)) }
            }
            var problems: [String: String] = [:]
            for await (id, problem) in group {
                if let problem { problems[id] = problem }
            }
            return problems
        }
    }
}
