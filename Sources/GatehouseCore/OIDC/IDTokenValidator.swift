import Foundation
import JWTKit

/// Full ID-token validation (design §4): header policy, signature with the issuer's JWKS
/// only, exact `iss`, `aud`/`azp`, `exp`/`iat`/`nbf` with the configured skew, and `nonce`.
public struct IDTokenValidator: Sendable {
    /// What the token's `nonce` must be.
    public enum ExpectedNonce: Sendable {
        /// The flow's own nonce, compared exactly.
        case exact(String)
        /// `rawNonce` of an ID-token sign-in, compared as the provider is configured.
        case raw(String, OIDCProviderConfiguration.NonceComparison)
        /// No nonce was sent: the token must carry none either (a token minted for another
        /// client's nonce cannot be replayed by leaving the nonce out).
        case none
    }

    let configuration: OIDCProviderConfiguration
    let metadata: IssuerMetadataCache

    /// The longest an ID token may claim to live: a year (providers issue them for minutes or
    /// hours; the replay guard remembers each until it expires).
    static let longestLifetime: TimeInterval = 366 * 86_400

    /// Validates `token` and returns its claims, or throws `invalid-id-token`,
    /// `id-token-expired`, `missing-or-invalid-nonce` or `invalid-idp-response`. With
    /// `acceptsPlatformClients` (an ID token an app obtained itself), the apps' client ids
    /// (`platformAudiences`) are trusted audiences beside the gateway's.
    public func validate(_ token: String, nonce: ExpectedNonce, now: Date = Date(), acceptsPlatformClients: Bool = false) async throws
        -> IDTokenClaims
    {
        let header = try JWSHeaderPolicy.check(token, maxLength: 16 << 10, algorithms: configuration.allowedAlgorithms)
        let keys = try await metadata.keys(for: header.kid)
        // jwt-kit verifies with the key's own algorithm whatever the header says: a header that
        // names another one is refused here, as RFC 7515 §4.1.1 asks.
        guard keys.algorithm == header.alg else {
            throw GatehouseError.invalidIdToken("The ID token's algorithm is not its key's.")
        }
        let claims: IDTokenClaims
        do {
            claims = try await keys.collection.verify(token, as: IDTokenClaims.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw GatehouseError.invalidIdToken("The ID token's signature does not verify.")
        } catch {
            throw GatehouseError.invalidIdToken("The ID token could not be verified (signature or required claims).")
        }
        // A key that says which issuer it signs for (Microsoft's common JWKS holds keys of every
        // tenant and keys of one tenant alone) verifies only that issuer's tokens: a key of one
        // issuer must not vouch for another's (`{tenantid}` is the token's own tenant).
        if let keyIssuer = keys.issuer, keyIssuer.replacingOccurrences(of: "{tenantid}", with: claims.tenantId ?? "") != claims.issuer {
            throw GatehouseError.invalidIdToken("The ID token is signed with a key of another issuer.")
        }
        try check(
            claims, nonce: nonce, now: now,
            audiences: Set([configuration.clientID] + (acceptsPlatformClients ? configuration.platformAudiences : [])),
            domainTenantID: try await domainTenantID())
        return claims
    }

    /// For a Microsoft endpoint named by a domain, the tenant GUID its discovery document's
    /// issuer names (`{login}/<GUID>/v2.0`), which a token's `tid` must be; `nil` otherwise.
    /// A domain endpoint whose discovery gives no GUID admits no token (fail closed).
    private func domainTenantID() async throws -> String? {
        guard case .microsoft(let login, let endpointTenant, _) = configuration.issuerRule, MicrosoftTenants.isDomain(endpointTenant) else {
            return nil
        }
        let tenant = MicrosoftTenants.tenant(inIssuer: try await metadata.discovery().issuer, login: login)?.lowercased() ?? ""
        return MicrosoftTenants.isGUID(tenant) ? tenant : ""
    }

    /// `iss` by the configured rule; never a prefix match.
    private func checkIssuer(_ claims: IDTokenClaims, domainTenantID: String?) throws {
        switch configuration.issuerRule {
        case .exact:
            guard ([configuration.issuer] + configuration.additionalTokenIssuers).contains(claims.issuer) else {
                throw GatehouseError.invalidIdToken("The ID token was issued by another issuer.")
            }
        case .microsoft(let login, let endpointTenant, let allowed):
            guard let tid = claims.tenantId?.lowercased(), MicrosoftTenants.isGUID(tid) else {
                throw GatehouseError.invalidIdToken("The ID token has no tenant id.")
            }
            guard claims.issuer == "\(login)/\(tid)/v2.0" else {
                throw GatehouseError.invalidIdToken("The ID token's issuer does not match its tenant.")
            }
            guard MicrosoftTenants.endpoint(endpointTenant, admits: tid), domainTenantID.map({ $0 == tid }) ?? true else {
                throw GatehouseError.invalidIdToken("The ID token's tenant is not the one the sign-in was started for.")
            }
            guard allowed.isEmpty || allowed.contains(tid) else {
                throw GatehouseError.operationNotAllowed("Accounts of this Microsoft tenant may not sign in here.", situation: .refusedByPolicy)
            }
        }
    }

    /// The claims by OpenID Connect Core §3.1.3.7, `audiences` being the client ids trusted.
    private func check(_ claims: IDTokenClaims, nonce: ExpectedNonce, now: Date, audiences: Set<String>, domainTenantID: String?) throws {
        try checkIssuer(claims, domainTenantID: domainTenantID)
        guard !claims.subject.isEmpty, claims.subject.count <= 255 else {
            throw GatehouseError.invalidIdToken("The ID token has no usable subject.")
        }
        guard claims.audience.contains(where: audiences.contains) else {
            throw GatehouseError.invalidIdToken("The ID token was issued for another client.")
        }
        // Untrusted extra audiences: a token meant for other parties too is refused.
        guard claims.audience.allSatisfy(audiences.contains) else {
            throw GatehouseError.invalidIdToken("The ID token also names an audience the gateway does not trust.")
        }
        // Several audiences: the party the token was issued to must be named, and trusted.
        if claims.audience.count > 1, claims.authorizedParty == nil {
            throw GatehouseError.invalidIdToken("The ID token names several audiences but no authorized party (azp).")
        }
        if let azp = claims.authorizedParty, !audiences.contains(azp) {
            throw GatehouseError.invalidIdToken("The ID token's authorized party is another client.")
        }
        let t = now.timeIntervalSince1970
        let skew = configuration.clockSkew
        guard claims.expiresAt + skew > t else { throw GatehouseError.idTokenExpired() }
        // A token is remembered until it expires (the replay guard): one that claims to live
        // for more than a year, or whose expiry is no finite number, is refused.
        guard claims.expiresAt - t <= Self.longestLifetime else {
            throw GatehouseError.invalidIdToken("The ID token expires more than a year from now.")
        }
        guard claims.issuedAt - skew <= t else {
            throw GatehouseError.invalidIdToken("The ID token was issued in the future.")
        }
        if let nbf = claims.notBefore, nbf - skew > t {
            throw GatehouseError.invalidIdToken("The ID token is not valid yet.")
        }
        switch nonce {
        case .none:
            guard claims.nonce == nil else { throw GatehouseError.missingOrInvalidNonce() }
        case .exact(let expected):
            guard let actual = claims.nonce, actual == expected else { throw GatehouseError.missingOrInvalidNonce() }
        case .raw(let raw, let comparison):
            let expected = comparison == .raw ? raw : SecureRandom.digest(raw)
            guard let actual = claims.nonce, actual == expected else { throw GatehouseError.missingOrInvalidNonce() }
        }
    }
}
