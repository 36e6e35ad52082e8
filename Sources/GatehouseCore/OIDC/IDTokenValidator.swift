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
        /// No nonce was sent, so none is checked.
        case none
    }

    let configuration: OIDCProviderConfiguration
    let metadata: IssuerMetadataCache

    /// Header parameters that would let a token choose its own verification key.
    static let keyInjectionHeaders = ["jku", "jwk", "x5u", "x5c"]

    /// Validates `token` and returns its claims, or throws `invalid-id-token`,
    /// `id-token-expired`, `missing-or-invalid-nonce` or `invalid-idp-response`.
    public func validate(_ token: String, nonce: ExpectedNonce, now: Date = Date()) async throws -> IDTokenClaims {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.count <= 16 << 10, parts.count == 3, let headerData = Base64URL.decode(String(parts[0])),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any]
        else {
            throw GatehouseError.invalidIdToken("The ID token is not a compact JWS.")
        }
        guard let alg = header["alg"] as? String, configuration.allowedAlgorithms.contains(alg) else {
            throw GatehouseError.invalidIdToken("The ID token's algorithm is not accepted.")
        }
        if let injected = Self.keyInjectionHeaders.first(where: { header[$0] != nil }) {
            throw GatehouseError.invalidIdToken("The ID token names its own key (\(injected)); only the issuer's published keys are used.")
        }
        if header["crit"] != nil {
            throw GatehouseError.invalidIdToken("The ID token has critical header parameters the gateway does not understand.")
        }
        let kid = header["kid"] as? String
        let keys = try await metadata.keys(for: kid)
        let claims: IDTokenClaims
        do {
            claims = try await keys.verify(token, as: IDTokenClaims.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw GatehouseError.invalidIdToken("The ID token's signature does not verify.")
        } catch {
            throw GatehouseError.invalidIdToken("The ID token could not be verified (signature or required claims).")
        }
        try check(claims, nonce: nonce, now: now)
        return claims
    }

    /// `iss` by the configured rule; never a prefix match.
    private func checkIssuer(_ claims: IDTokenClaims) throws {
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
            guard MicrosoftTenants.endpoint(endpointTenant, admits: tid) else {
                throw GatehouseError.invalidIdToken("The ID token's tenant is not the one the sign-in was started for.")
            }
            guard allowed.isEmpty || allowed.contains(tid) else {
                throw GatehouseError.operationNotAllowed("Accounts of this Microsoft tenant may not sign in here.", status: 403)
            }
        }
    }

    private func check(_ claims: IDTokenClaims, nonce: ExpectedNonce, now: Date) throws {
        try checkIssuer(claims)
        guard !claims.subject.isEmpty, claims.subject.count <= 255 else {
            throw GatehouseError.invalidIdToken("The ID token has no usable subject.")
        }
        guard claims.audience.contains(configuration.clientID) else {
            throw GatehouseError.invalidIdToken("The ID token was issued for another client.")
        }
        // Extra audiences are untrusted: a token meant for several parties is refused.
        guard claims.audience.allSatisfy({ $0 == configuration.clientID }) else {
            throw GatehouseError.invalidIdToken("The ID token also names an audience the gateway does not trust.")
        }
        if let azp = claims.authorizedParty, azp != configuration.clientID {
            throw GatehouseError.invalidIdToken("The ID token's authorized party is another client.")
        }
        let t = now.timeIntervalSince1970
        let skew = configuration.clockSkew
        guard claims.expiresAt + skew > t else { throw GatehouseError.idTokenExpired() }
        guard claims.issuedAt - skew <= t else {
            throw GatehouseError.invalidIdToken("The ID token was issued in the future.")
        }
        if let nbf = claims.notBefore, nbf - skew > t {
            throw GatehouseError.invalidIdToken("The ID token is not valid yet.")
        }
        switch nonce {
        case .none:
            break
        case .exact(let expected):
            guard let actual = claims.nonce, actual == expected else { throw GatehouseError.missingOrInvalidNonce() }
        case .raw(let raw, let comparison):
            let expected = comparison == .raw ? raw : SecureRandom.digest(raw)
            guard let actual = claims.nonce, actual == expected else { throw GatehouseError.missingOrInvalidNonce() }
        }
    }
}
