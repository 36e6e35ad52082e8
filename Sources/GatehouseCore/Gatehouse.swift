import CurlClient
import Foundation
import Logging

/// The core, assembled: every service the HTTP layer calls, over one storage and one
/// libcurl client.
public struct Gatehouse: Sendable {
    /// This build's version (`gatehouse --version`, the API description's `info.version`).
    public static let version = "0.2.0"

    /// The deployment settings.
    public let configuration: GatewayConfiguration
    /// The store, with accounts, links and sessions cached in memory (`CachedStore`).
    public let storage: any GatehouseStorage
    /// The same, for its change feed.
    private let cachedStore: CachedStore
    /// The configured providers.
    public let providers: ProviderRegistry
    /// The redirect sign-in flow.
    public let signIn: SignInService
    /// Sessions (cookie or bearer ID token).
    public let sessions: SessionService
    /// Accounts: linking, pending credentials, unlink, delete.
    public let accounts: AccountService
    /// The gateway's own tokens.
    public let tokens: GatewayTokenService
    /// Profiles and photos.
    public let profiles: ProfileService
    /// Provider API passthrough and the token vault.
    public let providerAPI: ProviderAPIService
    /// Internal services' credentials.
    public let serviceKeys: ServiceKeyService
    /// Lookup by email, disable, enable, revoke sessions.
    public let admin: AdminService
    /// Where the core's counters go.
    public let metrics: GatehouseMetrics
    /// Recent resource refusals of the store (a full disk), for readiness.
    public let storageHealth: StorageHealth
    /// Delivers the webhook outbox (`nil` without endpoints).
    public let webhooks: WebhookDispatcher?

    /// The retention the periodic purge (`ExpiredRecordsPurger`) applies to the webhook outbox:
    /// the configured one while no endpoint is configured, nil otherwise (the dispatcher drops
    /// what is past it, counting it in its metric). Events written while endpoints were
    /// configured would otherwise stay for ever once the last one is removed.
    public var outboxRetentionWithoutDispatcher: TimeInterval? {
        webhooks == nil ? (configuration.webhooks ?? WebhookConfiguration(endpoints: [])).retention : nil
    }
    /// The stored copy of the audit trail (the activity listing), written behind the requests.
    public let auditTrail: AuditTrail

    /// Builds the core; throws when the configuration is unsafe (see `GatewayConfiguration.validate`).
    public init(
        configuration: GatewayConfiguration, storage: any GatehouseStorage, vault: TokenVault, http: CurlHTTPClient,
        metrics: GatehouseMetrics = .disabled, logger: Logger = Logger(label: "gatehouse")
    ) throws {
        try configuration.validate()
        self.configuration = configuration
        let cachedStore = CachedStore(
            storage, capacity: configuration.accountCacheCapacity, lifetime: configuration.accountCacheLifetime,
            serviceKeyLifetime: configuration.serviceKeyCacheLifetime, clock: configuration.clock, metrics: metrics, logger: logger)
        self.cachedStore = cachedStore
        let storage: any GatehouseStorage = cachedStore
        self.storage = storage
        self.metrics = metrics
        self.storageHealth = StorageHealth(clock: configuration.clock)
        // Each provider sees the one client through its own timeout and metric label; the
        // photo hosts' breakers are shared (one host may serve several providers' pictures),
        // and each opens only on failures met by two users' photos.
        let photoHosts = HostBreakers(settings: configuration.circuitBreaker, clock: configuration.clock, distinctCallers: 2)
        func upstream(_ id: String) -> UpstreamHTTP {
            UpstreamHTTP(
                client: http, providerId: id, timeout: configuration.upstreamTimeout(for: id), metrics: metrics,
                maxPhotoBytes: configuration.maxPhotoBytes, photoAddresses: configuration.photoAddresses, photoHosts: photoHosts,
                photoTimeout: configuration.photoTimeout, logger: logger)
        }
        var providers: [any IdentityProvider] = []
        if let github = configuration.github {
            providers.append(GitHubProvider(configuration: github, http: upstream("github.com"), clock: configuration.clock, logger: logger))
        }
        if let microsoft = configuration.microsoft {
            providers.append(
                MicrosoftProvider(
                    configuration: microsoft, http: upstream("microsoft.com"), developmentMode: configuration.developmentMode,
                    clock: configuration.clock, logger: logger))
        }
        for oidc in configuration.oidcProviders {
            providers.append(
                OIDCProvider(
                    configuration: oidc, http: upstream(oidc.providerId), developmentMode: configuration.developmentMode,
                    clock: configuration.clock, logger: logger))
        }
        let registry = ProviderRegistry(providers)
        self.providers = registry
        let trail = AuditTrail(
            storage: storage, retention: configuration.auditRetention, clock: configuration.clock, metrics: metrics, logger: logger)
        self.auditTrail = trail
        let audit = AuditLog(logger: logger, trail: trail, clock: configuration.clock)
        var events = EventRecorder.disabled
        if let settings = configuration.webhooks, !settings.endpoints.isEmpty {
            let dispatcher = WebhookDispatcher(
                configuration: settings, storage: storage, http: http, clock: configuration.clock, metrics: metrics, logger: logger)
            self.webhooks = dispatcher
            events = EventRecorder(endpoints: settings.endpoints, metrics: metrics, wake: { dispatcher.wake() })
        } else {
            self.webhooks = nil
        }
        // Protected console on or off: an account that got it while the console was off would
        // be an operator the day it is turned on.
        let operatorClaim = configuration.protectedOperatorClaim
        var hooks: any SignInHooks = NoSignInHooks()
        if let settings = configuration.hooks, !settings.urls.isEmpty {
            hooks = HookClient(
                configuration: settings, http: http, clock: configuration.clock, metrics: metrics, breaker: configuration.circuitBreaker,
                operatorClaim: operatorClaim, logger: logger)
        }
        let accounts = AccountService(
            storage: storage, vault: vault, photoURLs: PhotoURLs(publicURL: configuration.publicURL),
            oneAccountPerEmail: configuration.oneAccountPerEmail, pendingLifetime: configuration.pendingCredentialLifetime,
            clock: configuration.clock, audit: audit, hooks: hooks, events: events, operatorClaim: operatorClaim)
        self.accounts = accounts
        let tokens = GatewayTokenService(
            configuration: configuration, storage: storage, accounts: accounts, vault: vault, logger: logger,
            keys: SigningKeyRing(
                storage: storage, vault: vault, tokenLifetime: configuration.idTokenLifetime,
                reloadInterval: configuration.signingKeyReloadInterval, clock: configuration.clock, logger: logger))
        self.tokens = tokens
        var signIn = SignInService(
            configuration: configuration, providers: registry, storage: storage, accounts: accounts, tokens: tokens,
            returnToPolicy: ReturnToPolicy(allowList: configuration.returnToAllowList))
        signIn.metrics = metrics
        self.signIn = signIn
        self.sessions = SessionService(
            storage: storage, tokens: tokens, recentLoginWindow: configuration.recentLoginWindow, clock: configuration.clock, audit: audit,
            events: events)
        let profiles = ProfileService(
            storage: storage, providers: registry, accounts: accounts, vault: vault, configuration: configuration, metrics: metrics,
            logger: logger)
        self.profiles = profiles
        self.providerAPI = ProviderAPIService(
            configuration: configuration, profiles: profiles, providers: registry,
            upstream: Dictionary(uniqueKeysWithValues: registry.ids.map { ($0, upstream($0)) }),
            hosts: HostBreakers(settings: configuration.circuitBreaker, clock: configuration.clock, distinctCallers: 2), audit: audit,
            metrics: metrics)
        var serviceKeys = ServiceKeyService(storage: storage, audit: audit, cache: cachedStore.serviceKeys)
        serviceKeys.events = events
        serviceKeys.uses = ServiceKeyUses(storage: storage, clock: configuration.clock, logger: logger)
        self.serviceKeys = serviceKeys
        self.admin = AdminService(storage: storage, accounts: accounts, audit: audit, events: events, clock: configuration.clock)
    }

    /// The core's background work, until the task is cancelled: following what other
    /// instances write to a shared store (see `CachedStore.followChanges()`).
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.cachedStore.followChanges() }
            if let webhooks { group.addTask { await webhooks.run() } }
            group.addTask { await self.auditTrail.run() }
        }
    }
}

extension Gatehouse {
    /// An operator's redelivery of the undelivered webhook event `id` (a delivery's id): due
    /// now, on the audit record, its endpoint's `410` pause lifted on this instance, the
    /// dispatcher woken. `not-found` when there is none.
    public func redeliver(_ id: String, by actor: AuditActor) async throws {
        try await admin.redeliver(id, by: actor)
        webhooks?.resume(delivery: id)
        webhooks?.wake()
    }
}
