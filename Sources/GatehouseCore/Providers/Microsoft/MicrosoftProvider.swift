import CurlClient
import Foundation
import Logging

/// Microsoft sign-in on the OIDC engine, with the platform's quirks (providers.md §1–§2):
/// per-tenant endpoints, the `{tenantid}` issuer template checked against the token's `tid`,
/// `oid` as the federated id, the profile from Graph `/me`, photos as Graph binaries.
public struct MicrosoftProvider: IdentityProvider {
    /// Always `microsoft.com`.
    public let id = "microsoft.com"
    let configuration: MicrosoftConfiguration
    let http: UpstreamHTTP
    let engines: Engines
    /// Shared by the engines of every tenant: the client registration is one.
    let health: ProviderHealth

    /// Creates the provider over the shared libcurl client.
    public init(
        configuration: MicrosoftConfiguration, http: UpstreamHTTP, developmentMode: Bool, clock: any GatehouseClock = SystemClock(),
        logger: Logger
    ) {
        self.configuration = configuration
        self.http = http
        let health = ProviderHealth(logger: logger)
        self.health = health
        engines = Engines(
            configuration: configuration, http: http, developmentMode: developmentMode, clock: clock, health: health, logger: logger)
    }

    /// The configured scopes.
    public var defaultScopes: [String] { configuration.defaultScopes }
    /// OpenID Connect's `login`: the credentials again, not the provider's own session.
    public var reauthenticationPrompt: String? { "login" }

    /// The authorize URL of the default tenant, or of the caller's `tenant` custom parameter
    /// (which is the gateway's, not forwarded); the tenant comes back as the flow's context.
    public func authorizationRedirect(for request: AuthorizationRequest) async throws -> AuthorizationRedirect {
        var request = request
        let tenant = request.customParameters.last { $0.0 == "tenant" }?.1 ?? configuration.tenant
        request.customParameters.removeAll { $0.0 == "tenant" }
        guard MicrosoftTenants.isValid(tenant) else {
            throw GatehouseError.invalidArgument("tenant must be common, organizations, consumers, a tenant GUID or a domain.")
        }
        // A configured tenant GUID or domain is a restriction, not a default: `tenant=` may name
        // only a permitted tenant (never common, organizations or consumers). Otherwise an
        // allow-list still refuses a GUID outside it.
        // A configured audience (`organizations`, `consumers`) is a restriction too: `tenant=`
        // may not name an endpoint that admits accounts it keeps out.
        let permitted = configuration.permittedTenants
        let refused =
            configuration.restrictsTenant
            ? !permitted.contains(tenant.lowercased())
            : !MicrosoftTenants.audience(configuration.tenant, admitsEndpoint: tenant)
                || (!permitted.isEmpty && MicrosoftTenants.isGUID(tenant) && !permitted.contains(tenant.lowercased()))
        if refused {
            throw GatehouseError.operationNotAllowed("Accounts of this Microsoft tenant may not sign in here.", situation: .refusedByPolicy)
        }
        do {
            var redirect = try await engines.engine(tenant).authorizationRedirect(for: request)
            redirect.context = tenant
            return redirect
        } catch let error as GatehouseError where error.code == .invalidArgument {
            // Microsoft does not know the tenant: its engine gives up its place, so names
            // made up by the thousand cannot push out the engines of tenants in use.
            await engines.forget(tenant)
            throw error
        }
    }

    /// The code flow at the flow's tenant, then Graph `/me` and the photo's presence.
    public func completeSignIn(_ callback: CallbackParameters) async throws -> ProviderSignIn {
        let tenant = callback.context.isEmpty ? configuration.tenant : callback.context
        var (claims, tokens, _) = try await engines.engine(tenant).exchange(callback)
        guard let oid = claims.objectId, !oid.isEmpty else {
            throw GatehouseError.invalidIdToken("The ID token has no oid (the profile scope is required).")
        }
        tokens.context = tenant
        var profile = try await fetchProfile(tokens: tokens, claims: claims)
        guard profile.federatedId.lowercased() == oid.lowercased() else {
            throw GatehouseError.invalidIdPResponse("Graph describes another user than the ID token.")
        }
        profile.federatedId = oid
        return ProviderSignIn(tokens: tokens, profile: profile, idTokenClaims: claims)
    }

    /// The refresh-token grant at the tenant of the sign-in.
    public func refresh(_ tokens: ProviderTokens) async throws -> ProviderTokens {
        var refreshed = try await engines.engine(tokens.context ?? configuration.tenant).refresh(tokens)
        refreshed.context = tokens.context
        return refreshed
    }

    /// Discovery problems of the default tenant.
    public func readinessProblem() async -> String? {
        if let problem = health.readinessProblem { return problem }
        return await engines.engine(configuration.tenant).readinessProblem()
    }

    /// Discovery problems of the default tenant, within `limit` (`OIDCProvider`'s).
    public func readinessProblem(within limit: Duration) async -> String? {
        if let problem = health.readinessProblem { return problem }
        return await engines.engine(configuration.tenant).readinessProblem(within: limit)
    }

    /// Graph `/me`, normalized; the email is verified only for personal accounts (their
    /// sign-in name) or with the ID token's `xms_edov` for that same address.
    public func fetchProfile(tokens: ProviderTokens) async throws -> ProviderProfile {
        try await fetchProfile(tokens: tokens, claims: nil)
    }

    func fetchProfile(tokens: ProviderTokens, claims: IDTokenClaims?) async throws -> ProviderProfile {
        let me = try await graph("/v1.0/me", tokens: tokens)
        guard let graphID = me["id"]?.stringValue, let upn = me["userPrincipalName"]?.stringValue else {
            throw GatehouseError.invalidIdPResponse("Graph's /me answer has no id or userPrincipalName.")
        }
        let personal = graphID.count == 16 && graphID.allSatisfy(\.isHexDigit)
        // Personal accounts: Graph's id is the 16-hex CID; the oid is it, padded (providers.md §1.5).
        let oid = personal ? "00000000-0000-0000-\(graphID.prefix(4))-\(graphID.dropFirst(4))" : graphID
        let guestUPN = upn.contains("#EXT#")
        let email = me["mail"]?.stringValue ?? (guestUPN ? claims?.email : upn)
        let verified: Bool
        if personal {
            verified = email?.lowercased() == upn.lowercased()
        } else {
            // The `email` claim is mutable and unverified unless the tenant owns its domain (nOAuth).
            verified = claims?.emailDomainOwnerVerified == true && email != nil && claims?.email?.lowercased() == email?.lowercased()
        }
        let hasPhoto = try await photoExists(tokens: tokens)
        var raw = me
        if case .object(var object) = raw {
            object.removeValue(forKey: "@odata.context")
            raw = .object(object)
        }
        let tenant = claims?.tenantId ?? (personal ? MicrosoftTenants.consumers : nil)
        return ProviderProfile(
            providerId: id, federatedId: oid, username: upn, displayName: me["displayName"]?.stringValue,
            givenName: me["givenName"]?.stringValue, familyName: me["surname"]?.stringValue, email: email, emailVerified: verified,
            photoSourceURL: hasPhoto ? "\(configuration.graphBaseURL)/v1.0/me/photo/$value" : nil, tenantId: tenant,
            locale: me["preferredLanguage"]?.stringValue, jobTitle: me["jobTitle"]?.stringValue, rawUserInfo: raw)
    }

    /// The Graph binary at `size` (the nearest smaller available size when that one is
    /// missing), or the largest photo without a size.
    public func fetchPhoto(profile: ProviderProfile, tokens: ProviderTokens, size: Int?) async throws -> ProviderPhoto {
        guard profile.photoSourceURL != nil else { throw GatehouseError.noPhoto() }
        var paths: [String] = []
        if let size {
            paths = Self.photoSizes.filter { $0 <= size }.reversed().map { "/v1.0/me/photos/\($0)x\($0)/$value" }
        }
        paths.append("/v1.0/me/photo/$value")
        for path in paths {
            if let photo = try await PhotoSource.open(graphRequest(path, tokens: tokens, accept: "image/*", maxBytes: nil), http: http) {
                return photo
            }
        }
        throw GatehouseError.noPhoto()
    }

    /// The sizes Graph serves (providers.md §2.2).
    static let photoSizes = [48, 64, 96, 120, 240, 360, 432, 504, 648]

    private func photoExists(tokens: ProviderTokens) async throws -> Bool {
        let response = try await graphResponse("/v1.0/me/photo", tokens: tokens, accept: "application/json", maxBytes: 64 << 10)
        if response.status == 200 { return true }
        // Any 404 is "no photo", whatever code the backend chose (ImageNotFound, ErrorItemNotFound, ConsumerPhotoIsNotSupported, …).
        if response.status == 404 { return false }
        throw UpstreamErrors.status(response, providerId: id)
    }

    private func graph(_ path: String, tokens: ProviderTokens) async throws -> JSONValue {
        let response = try await graphResponse(path, tokens: tokens, accept: "application/json", maxBytes: 1 << 20)
        guard response.status == 200 else { throw UpstreamErrors.status(response, providerId: id) }
        guard let json = try? JSONValue.parseRepeated(response.body), case .object = json else {
            throw GatehouseError.invalidIdPResponse("Graph's answer is not a JSON object.")
        }
        return json
    }

    /// A Graph read of the profile or the photo's metadata: `.high`, as a sign-in makes it (the
    /// photo's bytes are `.normal`, like every photo).
    private func graphResponse(_ path: String, tokens: ProviderTokens, accept: String, maxBytes: Int) async throws -> OutboundResponse {
        var request = graphRequest(path, tokens: tokens, accept: accept, maxBytes: maxBytes)
        request.priority = .high
        return try await http.execute(request, endpoint: path.contains("/photo") ? .photo : .profile)
    }

    private func graphRequest(_ path: String, tokens: ProviderTokens, accept: String, maxBytes: Int?) -> OutboundRequest {
        OutboundRequest(
            url: configuration.graphBaseURL + path, headers: ["Authorization": "Bearer \(tokens.accessToken)", "Accept": accept],
            maxResponseBytes: maxBytes)
    }

    /// One OIDC engine (discovery + keys) per tenant segment in use, created on demand. The
    /// configured tenant's and the allow-listed tenants' engines are kept for the process's
    /// life: no caller naming tenants can make them read their discovery and keys again. Any
    /// other tenant `tenant=` names (and anyone may name one) takes one of `capacity` places,
    /// the least recently used given up first, and a tenant Microsoft does not know gives its
    /// place up at once (`forget`): another tenant in use keeps its engine unless 64 tenants
    /// Microsoft knows are named before it is used again.
    actor Engines {
        /// How many engines of tenants outside the configuration are kept at once.
        static let capacity = 64
        private let configuration: MicrosoftConfiguration
        private let http: UpstreamHTTP
        private let developmentMode: Bool
        private let logger: Logger
        private let clock: any GatehouseClock
        private let health: ProviderHealth
        /// The tenants whose engines are never given up: the configured one and the allow-list.
        private let pinned: Set<String>
        private var kept: [String: OIDCProvider] = [:]
        /// The other tenants' engines, each with the use count of its last use (larger is more recent).
        private var recent: [String: (engine: OIDCProvider, lastUse: UInt64)] = [:]
        private var uses: UInt64 = 0

        init(
            configuration: MicrosoftConfiguration, http: UpstreamHTTP, developmentMode: Bool, clock: any GatehouseClock, health: ProviderHealth,
            logger: Logger
        ) {
            self.clock = clock
            self.health = health
            self.configuration = configuration
            self.http = http
            self.developmentMode = developmentMode
            self.logger = logger
            pinned = configuration.permittedTenants.union([configuration.tenant.lowercased()])
        }

        /// The engine of `tenant` (any case), created on first use.
        func engine(_ tenant: String) -> OIDCProvider {
            let key = tenant.lowercased()
            if let engine = kept[key] { return engine }
            uses += 1
            if let found = recent[key] {
                recent[key]?.lastUse = uses
                return found.engine
            }
            let engine = makeEngine(key)
            if pinned.contains(key) {
                kept[key] = engine
            } else {
                // A linear scan, on a new tenant only: 64 entries cost less than keeping an order.
                if recent.count >= Self.capacity, let oldest = recent.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
                    recent[oldest] = nil
                }
                recent[key] = (engine, uses)
            }
            return engine
        }

        /// Gives up the engine of `tenant` unless it is the configured or an allow-listed one.
        func forget(_ tenant: String) {
            recent[tenant.lowercased()] = nil
        }

        /// Whether the engine of `tenant` is kept (tests).
        func keeps(_ tenant: String) -> Bool {
            let key = tenant.lowercased()
            return kept[key] != nil || recent[key] != nil
        }

        private func makeEngine(_ key: String) -> OIDCProvider {
            var oidc = OIDCProviderConfiguration(
                providerId: "microsoft.com", issuer: "\(configuration.loginBaseURL)/\(key)/v2.0", clientID: configuration.clientID,
                clientSecret: configuration.clientSecret, allowedAlgorithms: ["RS256"])
            // The ID token's `tid` must be one of the permitted tenants known by GUID. The
            // engine of a permitted domain admits only that domain's tenant (the GUID its
            // discovery names, checked by the validator), so the GUID allow-list does not apply.
            let permitted = configuration.permittedTenants
            oidc.issuerRule = .microsoft(
                loginBaseURL: configuration.loginBaseURL, endpointTenant: key,
                allowedTenants: MicrosoftTenants.isDomain(key) && permitted.contains(key) ? [] : permitted.filter(MicrosoftTenants.isGUID))
            oidc.usesUserInfo = false
            oidc.endpointOverrides = [:]
            // Only the configured tenant, when it is one organization, refusing the app is the
            // operator's registration gone wrong; any other tenant's refusal (the users of
            // `common`, another tenant named by `tenant=`) is that tenant's own.
            oidc.tenantsRefuseClients = !configuration.restrictsTenant || key != configuration.tenant.lowercased()
            return OIDCProvider(
                configuration: oidc, http: http, developmentMode: developmentMode, clock: clock, health: health, logger: logger)
        }
    }
}
