import CurlClient
import Foundation
import JWTKit
import Logging

/// Discovery and JWKS of one issuer, fetched through the libcurl client and cached.
///
/// - Discovery whose `issuer` differs from the configured one disables the provider (the
///   reason is kept for `/readyz` and logged once).
/// - An unknown `kid` triggers one JWKS refetch, at most once per cooldown, so forged
///   tokens cannot make the gateway hammer the provider.
/// - A warm cache keeps working while the provider's endpoints are down; a cold cache fails
///   closed.
public actor IssuerMetadataCache {
    /// The signing keys of one JWKS answer.
    struct KeySet {
        let collection: JWTKeyCollection
        let keyIDs: Set<String>
        /// The algorithm each key verifies, by `kid` (`anonymousKeyID` for a lone key without one).
        let algorithms: [String: String]
        /// The issuer a key says it signs for (Microsoft's `issuer` member), by `kid`.
        let issuers: [String: String]
        let count: Int
        let fetchedAt: Date
    }

    /// The keys a token is verified with, and the algorithm of the key its `kid` names.
    struct VerificationKeys {
        /// The issuer's keys.
        let collection: JWTKeyCollection
        /// The algorithm of the token's key: its `alg`, or the one fixed when it had none.
        let algorithm: String?
        /// The issuer the token's key says it signs for, if it says (Microsoft's keys do:
        /// `{tenantid}` for a key of every tenant, one tenant's issuer for a key of its own).
        let issuer: String?
    }

    private let configuration: OIDCProviderConfiguration
    private let http: UpstreamHTTP
    private let developmentMode: Bool
    private let logger: Logger
    private let clock: any GatehouseClock
    private var document: (value: DiscoveryDocument, fetchedAt: Date)?
    private var keySet: KeySet?
    private var lastJWKSFetch: Date?
    /// Counts the JWKS fetches started, so that a fetch takes back only its own cooldown.
    private var jwksFetchGeneration = 0
    /// Why the last JWKS fetch of a cold cache failed: the callers the cooldown then holds
    /// back are told the same.
    private var lastKeyFetchFailure: GatehouseError?
    /// When a refresh of the expired discovery document last failed (`nil` once one succeeds).
    private var lastDiscoveryFailure: Date?
    /// Reasons already logged for skipped JWKS members (bounded).
    private var loggedSkips: Set<String> = []
    /// Why the provider is disabled, for `/readyz`.
    public private(set) var disabledReason: String?
    /// Whether a discovery document is held, expired or not: a slow refresh serves it meanwhile.
    public var holdsDocument: Bool { document != nil }

    /// Creates an empty cache.
    public init(
        configuration: OIDCProviderConfiguration, http: UpstreamHTTP, developmentMode: Bool, clock: any GatehouseClock = SystemClock(),
        logger: Logger
    ) {
        self.clock = clock
        self.configuration = configuration
        self.http = http
        self.developmentMode = developmentMode
        self.logger = logger
    }

    /// The discovery document (cached; overrides applied).
    ///
    /// Callers arriving while it is fetched (the actor lets them in at its `await`) share that
    /// one fetch. While the provider fails to answer a refresh, the expired document serves,
    /// and the provider is asked again only once `jwksRefetchCooldown` has passed: otherwise
    /// every call would wait for another failure first, the upstream timeout when it hangs.
    public func discovery() async throws -> DiscoveryDocument {
        let now = clock.now()
        if let document {
            if now.timeIntervalSince(document.fetchedAt) < configuration.metadataLifetime { return document.value }
            if let failed = lastDiscoveryFailure, now.timeIntervalSince(failed) < configuration.jwksRefetchCooldown { return document.value }
        }
        do {
            // The fetch stores its document, or its failure, itself, before the run ends: a
            // caller that finds no run going on finds what it brought, even when every caller
            // that waited for it has left (a readiness probe stops waiting after half a second).
            let fetch = discoveryFetches.task(for: Self.discoveryKey) {
                do {
                    let fresh = try await self.fetchDiscovery()
                    await self.store(fresh)
                    return fresh
                } catch {
                    await self.recordFailure(error)
                    throw error
                }
            }
            return try await discoveryFetches.value(of: fetch)
        } catch let error as GatehouseError where error.code == .providerMisconfigured {
            throw error
        } catch is CancellationError where Task.isCancelled {
            // This caller went away; the fetch goes on for the others. (A fetch cut short by
            // the client's shutdown is a failure like any other, below.)
            throw CancellationError()
        } catch {
            // A stale document is better than none while the provider is unreachable.
            guard let document else { throw error }
            return document.value
        }
    }

    /// Keeps what a failed discovery fetch means: a misconfigured provider's document is
    /// dropped; while an expired one serves, the provider is asked again only after the cooldown.
    private func recordFailure(_ error: any Error) {
        if let error = error as? GatehouseError, error.code == .providerMisconfigured {
            document = nil
        } else if document != nil {
            lastDiscoveryFailure = clock.now()
        }
    }

    /// The discovery fetch under way, if any.
    private let discoveryFetches = SingleFlight<String, DiscoveryDocument>()
    /// The single-flight key of the discovery fetch (this cache is per issuer).
    private static let discoveryKey = "discovery"

    /// Keeps a fetched discovery document: the provider answered, so it is enabled again.
    private func store(_ fresh: DiscoveryDocument) {
        document = (fresh, clock.now())
        lastDiscoveryFailure = nil
        disabledReason = nil
    }

    private func fetchDiscovery() async throws -> DiscoveryDocument {
        let url = configuration.issuer.trimmingSuffix("/") + "/.well-known/openid-configuration"
        let response = try await get(url, endpoint: .discovery)
        if case .microsoft = configuration.issuerRule, Self.isUnknownTenant(response) {
            // The caller's `tenant=` named a tenant Microsoft does not know: the caller's mistake.
            throw GatehouseError.invalidArgument("Microsoft does not know the tenant named by tenant=; check its domain or ID.")
        }
        guard response.status == 200 else { throw UpstreamErrors.status(response, providerId: configuration.providerId, shared: true) }
        guard var parsed = try? JSONDecoder().decode(DiscoveryDocument.self, from: Data(response.body)) else {
            throw disable("its discovery document is not valid OpenID Provider metadata")
        }
        guard Self.discoveryIssuerAccepted(parsed.issuer, configuration) else {
            throw disable("its discovery document names issuer \(parsed.issuer.prefix(200).debugDescription), not the configured one")
        }
        let overrides = configuration.endpointOverrides
        parsed.authorizationEndpoint = overrides["authorization_endpoint"] ?? parsed.authorizationEndpoint
        parsed.tokenEndpoint = overrides["token_endpoint"] ?? parsed.tokenEndpoint
        parsed.userinfoEndpoint = overrides["userinfo_endpoint"] ?? parsed.userinfoEndpoint
        parsed.jwksURI = overrides["jwks_uri"] ?? parsed.jwksURI
        for endpoint in [parsed.authorizationEndpoint, parsed.tokenEndpoint, parsed.jwksURI] + [parsed.userinfoEndpoint].compactMap({ $0 }) {
            do {
                try EndpointPolicy.check(endpoint, developmentMode: developmentMode)
            } catch {
                throw disable("its discovery document names an endpoint the gateway may not call (\(endpoint.prefix(200).debugDescription))")
            }
        }
        return parsed
    }

    /// Microsoft's answer for a tenant it does not know: `400` with `invalid_tenant` or the
    /// error code 90002 (AADSTS90002).
    static func isUnknownTenant(_ response: OutboundResponse) -> Bool {
        guard response.status == 400, response.body.count <= 64 << 10,
            let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        else { return false }
        return object["error"] as? String == "invalid_tenant" || (object["error_codes"] as? [Int])?.contains(90002) == true
    }

    /// Exact equality, or Microsoft's template / tenant-GUID forms under the same login host.
    static func discoveryIssuerAccepted(_ issuer: String, _ configuration: OIDCProviderConfiguration) -> Bool {
        switch configuration.issuerRule {
        case .exact:
            return issuer == configuration.issuer
        case .microsoft(let login, let endpointTenant, _):
            // A tenant named by a domain is one tenant: its discovery names that tenant's GUID,
            // which its tokens' `tid` must be (`IDTokenValidator`); the template would leave
            // nothing to compare them with.
            if issuer == "\(login)/{tenantid}/v2.0" { return !MicrosoftTenants.isDomain(endpointTenant) }
            return MicrosoftTenants.tenant(inIssuer: issuer, login: login).map(MicrosoftTenants.isGUID) ?? false
        }
    }

    private func disable(_ reason: String) -> GatehouseError {
        let message = "\(configuration.providerId) is disabled: \(reason)."
        if disabledReason != message {
            logger.error("OIDC provider disabled", metadata: ["provider.id": "\(configuration.providerId)", "reason": "\(reason)"])
        }
        disabledReason = message
        return GatehouseError(code: .providerMisconfigured, detail: message)
    }

    /// The JWKS fetch under way, if any.
    private let keyFetches = SingleFlight<String, KeySet>()

    /// The key collection to verify a token whose header names `kid`. Throws
    /// `invalid-id-token` when no key of the issuer has that id, even after a refetch.
    func keys(for kid: String?) async throws -> VerificationKeys {
        if let keySet, keySet.matches(kid), clock.now().timeIntervalSince(keySet.fetchedAt) < configuration.metadataLifetime {
            return keySet.verifying(kid)
        }
        // Every fetch, a failed one too, starts the cooldown: neither an unknown `kid` nor a
        // cold or expired cache can make the gateway call a failing JWKS endpoint more often.
        let cooledDown = lastJWKSFetch.map { clock.now().timeIntervalSince($0) >= configuration.jwksRefetchCooldown } ?? true
        if cooledDown || keyFetches.isRunning(Self.jwks) {
            do {
                keySet = try await sharedKeyFetch()
            } catch is CancellationError where Task.isCancelled {
                // This caller went away: no refresh failed, and it verifies nothing.
                throw CancellationError()
            } catch {
                // Warm cache: keep verifying with the keys we have; cold cache: fail closed.
                guard keySet != nil else {
                    lastKeyFetchFailure = error as? GatehouseError
                    throw error
                }
                logger.warning("JWKS refresh failed; using cached keys", metadata: ["provider.id": "\(configuration.providerId)"])
            }
        }
        guard let keySet else {
            // Cold, and the cooldown holds the next fetch back: no key is known, so nothing says
            // the token's key is not published. Its caller hears what the fetch's caller heard.
            throw lastKeyFetchFailure ?? jwksUnreadable
        }
        guard keySet.matches(kid) else {
            throw GatehouseError.invalidIdToken("The ID token is signed with a key the issuer does not publish.")
        }
        return keySet.verifying(kid)
    }

    /// One JWKS fetch at a time: callers arriving while it runs (the actor lets them in at
    /// its `await`) wait for its answer instead of failing on the cooldown with no keys.
    private func sharedKeyFetch() async throws -> KeySet {
        // Checked and started without a suspension in between: the cooldown starts with the fetch.
        if !keyFetches.isRunning(Self.jwks) {
            lastJWKSFetch = clock.now()
            jwksFetchGeneration += 1
        }
        let generation = jwksFetchGeneration
        // The fetch stores its keys itself, before the run ends: a caller that finds no run
        // going on finds the keys it brought.
        let fetch = keyFetches.task(for: Self.jwks) {
            do {
                return await self.keep(try await self.fetchKeys())
            } catch let error as GatehouseError where error.situation == .overloaded {
                // Refused by the gateway's own limit on calls out: nothing was fetched, so
                // this fetch's cooldown is taken back (once, by the fetch itself, and only
                // while no later fetch has started one of its own).
                await self.forgetCooldown(of: generation)
                throw error
            }
        }
        return try await keyFetches.value(of: fetch)
    }

    /// Takes back the cooldown fetch `generation` started, unless a later fetch started another.
    private func forgetCooldown(of generation: Int) {
        if jwksFetchGeneration == generation { lastJWKSFetch = nil }
    }

    /// Keeps a fetched key set and answers the set now kept. A set with no usable key (empty,
    /// or only keys skipped) leaves a cached set within its lifetime in place: a provider's
    /// passing glitch, which anyone can make the gateway refetch into with an unknown `kid`, must
    /// not stop sign-ins. It replaces an older one, so keys a provider withdrew stop verifying
    /// within a lifetime.
    private func keep(_ fetched: KeySet) -> KeySet {
        if fetched.count == 0, let keySet, clock.now().timeIntervalSince(keySet.fetchedAt) < configuration.metadataLifetime {
            logger.warning("JWKS holds no usable key; using cached keys", metadata: ["provider.id": "\(configuration.providerId)"])
            return keySet
        }
        keySet = fetched
        return fetched
    }

    /// `upstream-unavailable`: the issuer's JWKS did not answer with a key set.
    private var jwksUnreadable: GatehouseError {
        GatehouseError.upstreamUnavailable(configuration.providerId, detail: "\(configuration.providerId)'s JWKS could not be read.")
    }

    /// The single-flight key of the JWKS fetch (one per issuer: this cache is per issuer).
    private static let jwks = "jwks"

    private func fetchKeys() async throws -> KeySet {
        let discovered = try await discovery()
        let response = try await get(discovered.jwksURI, endpoint: .jwks)
        guard response.status == 200, let document = try? JSONValue.parse(Data(response.body)),
            case .array(let members)? = document["keys"]
        else {
            throw jwksUnreadable
        }
        // RFC 7517 §5: each key on its own; what cannot verify a signature is skipped.
        var usable: [JWK] = []
        var issuers: [String: String] = [:]
        for member in members {
            switch JWKSMember.signingKey(member) {
            case .usable(var key):
                if key.algorithm == nil {
                    guard
                        let algorithm = JWKSMember.algorithm(
                            for: key, supported: discovered.idTokenSigningAlgValuesSupported?.filter(configuration.allowedAlgorithms.contains))
                    else {
                        skip(member, "a key without alg whose algorithm cannot be told")
                        continue
                    }
                    key.algorithm = algorithm
                }
                // The issuer a usable key says it signs for (a skipped member of the same `kid`,
                // an encryption key say, names none of it).
                if let kid = member["kid"]?.stringValue, let issuer = member["issuer"]?.stringValue { issuers[kid] = issuer }
                usable.append(key)
            case .skipped(let reason): skip(member, reason)
            }
        }
        let collection = JWTKeyCollection()
        var ids: Set<String> = []
        var algorithms: [String: String] = [:]
        var count = 0
        for key in usable {
            if let kid = key.keyIdentifier?.string {
                // A key jwt-kit cannot load (odd curve, short modulus) is skipped too.
                guard (try? await collection.add(jwk: key)) != nil else {
                    skip(nil, "jwt-kit cannot load key \(kid.prefix(64))")
                    continue
                }
                ids.insert(kid)
                algorithms[kid] = key.algorithm?.rawValue
                count += 1
            } else if usable.count == 1 {
                // A lone key without `kid` verifies the tokens that name none.
                var named = key
                named.keyIdentifier = JWKIdentifier(string: Self.anonymousKeyID)
                guard (try? await collection.add(jwk: named, isDefault: true)) != nil else { continue }
                algorithms[Self.anonymousKeyID] = key.algorithm?.rawValue
                count += 1
            } else {
                skip(nil, "a key without kid among several cannot be chosen")
            }
        }
        return KeySet(
            collection: collection, keyIDs: ids, algorithms: algorithms, issuers: issuers.filter { ids.contains($0.key) }, count: count,
            fetchedAt: clock.now())
    }

    /// The id under which a lone key without `kid` is kept (never matched by a token's `kid`:
    /// it is not in `keyIDs`).
    static let anonymousKeyID = "gatehouse:no-kid"

    /// Logs a skipped JWKS member once per issuer and reason.
    private func skip(_ member: JSONValue?, _ reason: String) {
        guard loggedSkips.count < 64, loggedSkips.insert(reason).inserted else { return }
        logger.notice("JWKS key skipped", metadata: ["provider.id": "\(configuration.providerId)", "reason": "\(reason)"])
    }

    /// Discovery and keys are `.high`: every sign-in and every ID token checked needs them.
    private func get(_ url: String, endpoint: UpstreamEndpoint) async throws -> OutboundResponse {
        var request = OutboundRequest(url: url, headers: ["Accept": "application/json"], maxResponseBytes: 256 << 10)
        request.priority = .high
        return try await http.execute(request, endpoint: endpoint)
    }
}

extension IssuerMetadataCache.KeySet {
    /// A token with a `kid` needs that key; one without is accepted only when the set has a single key.
    func matches(_ kid: String?) -> Bool {
        if let kid { return keyIDs.contains(kid) }
        return count == 1
    }

    /// The keys for a token naming `kid` (which `matches`): a token without one is verified by
    /// the set's only key, with or without its own `kid` (jwt-kit's default key).
    func verifying(_ kid: String?) -> IssuerMetadataCache.VerificationKeys {
        let algorithm = kid.map { algorithms[$0] } ?? (algorithms.count == 1 ? algorithms.values.first : nil)
        return .init(collection: collection, algorithm: algorithm, issuer: kid.flatMap { issuers[$0] })
    }
}

extension String {
    /// The string without one trailing `suffix`.
    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
