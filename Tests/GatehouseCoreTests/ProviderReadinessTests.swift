import Testing

@testable import GatehouseCore

/// How readiness asks the configured providers (`ProviderRegistry.readinessProblems(within:)`).
@Suite struct ProviderReadinessTests {
    /// Where providers meet: each arrival waits until `expected` have arrived, or until its
    /// task is cancelled (a deadline passed).
    actor Rendezvous {
        let expected: Int
        private var arrived = 0

        init(expected: Int) { self.expected = expected }

        /// Returns once `expected` callers have arrived, or once the caller is cancelled.
        func arrive() async {
            arrived += 1
            while arrived < expected, !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    /// A provider whose readiness answers only once every provider of `rendezvous` is being
    /// asked at the same time, and otherwise reports that it was asked alone.
    struct MeetingProvider: IdentityProvider {
        let id: String
        let rendezvous: Rendezvous
        var defaultScopes: [String] { [] }

        func readinessProblem(within limit: Duration) async -> String? {
            let met = await Deadline.answer(within: limit) { await rendezvous.arrive() } != nil
            return met ? nil : "\(id) was asked alone"
        }

        func authorizationRedirect(for request: AuthorizationRequest) async throws -> AuthorizationRedirect { throw Self.unused }
        func completeSignIn(_ callback: CallbackParameters) async throws -> ProviderSignIn { throw Self.unused }
        func fetchProfile(tokens: ProviderTokens) async throws -> ProviderProfile { throw Self.unused }
        func fetchPhoto(profile: ProviderProfile, tokens: ProviderTokens, size: Int?) async throws -> ProviderPhoto { throw Self.unused }

        /// What every flow of this readiness-only provider throws.
        static let unused = GatehouseError.operationNotAllowed("readiness only")
    }

    @Test("every provider is asked at once: three whose answers wait for each other are all ready, none asked alone")
    func providersAreAskedAtOnce() async {
        let rendezvous = Rendezvous(expected: 3)
        let registry = ProviderRegistry(["a", "b", "c"].map { MeetingProvider(id: $0, rendezvous: rendezvous) })
        // One after the other, the first would wait out its whole limit alone.
        let problems = await registry.readinessProblems(within: .seconds(30))
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("a provider's problem is reported under its id")
    func problemsByID() async {
        let registry = ProviderRegistry([MeetingProvider(id: "lonely", rendezvous: Rendezvous(expected: 2))])
        #expect(await registry.readinessProblems(within: .milliseconds(50)) == ["lonely": "lonely was asked alone"])
    }
}
