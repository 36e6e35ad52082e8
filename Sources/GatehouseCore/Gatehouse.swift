import CurlClient
import Logging

/// The core, assembled: every service the HTTP layer calls, over one storage and one
/// libcurl client.
public struct Gatehouse: Sendable {
    /// The deployment settings.
    public let configuration: GatewayConfiguration
    /// The store.
    public let storage: any GatehouseStorage
    /// The configured providers.
    public let providers: ProviderRegistry
    /// The redirect sign-in flow.
    public let signIn: SignInService
    /// Sessions.
    public let sessions: SessionService
    /// Profiles and photos.
    public let profiles: ProfileService
    /// Internal services' credentials.
    public let serviceKeys: ServiceKeyService

    /// Builds the core; throws when the configuration is unsafe (see `GatewayConfiguration.validate`).
    public init(
        configuration: GatewayConfiguration, storage: any GatehouseStorage, vault: TokenVault, http: CurlHTTPClient,
        logger: Logger = Logger(label: "gatehouse")
    ) throws {
        try configuration.validate()
        self.configuration = configuration
        self.storage = storage
        var providers: [any IdentityProvider] = []
        if let github = configuration.github {
            providers.append(GitHubProvider(configuration: github, http: http))
        }
        if let microsoft = configuration.microsoft {
            providers.append(
                MicrosoftProvider(configuration: microsoft, http: http, developmentMode: configuration.developmentMode, logger: logger))
        }
        for oidc in configuration.oidcProviders {
            providers.append(OIDCProvider(configuration: oidc, http: http, developmentMode: configuration.developmentMode, logger: logger))
        }
        let registry = ProviderRegistry(providers)
        self.providers = registry
        let accounts = AccountService(storage: storage, vault: vault, photoBaseURL: "\(configuration.publicURL)/v1/me/photo")
        self.signIn = SignInService(
            configuration: configuration, providers: registry, storage: storage, accounts: accounts,
            returnToPolicy: ReturnToPolicy(allowList: configuration.returnToAllowList))
        self.sessions = SessionService(storage: storage)
        self.profiles = ProfileService(
            storage: storage, providers: registry, accounts: accounts, profileLifetime: configuration.profileCacheLifetime,
            photoCacheBytes: configuration.photoCacheBytes)
        self.serviceKeys = ServiceKeyService(storage: storage)
    }
}
