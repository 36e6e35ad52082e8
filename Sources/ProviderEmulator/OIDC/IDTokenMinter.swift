import Foundation
import JWTKit

/// Signs ID tokens for an emulated issuer, spoiling them as the armed tamper modes say
/// (`POST /_emulator/oidc/tamper`), so the gateway's rejections can be tested end to end.
struct IDTokenMinter {
    let spec: OIDCIssuerSpec
    let state: OIDCState
    let keys: SigningKeys
    /// Another key slot the issuer's JWKS publishes, bound to one issuer of its own (Microsoft's
    /// personal-accounts key), which `other-tenant-key` signs with.
    var otherTenantSpec: OIDCIssuerSpec? = nil

    /// The signed (or deliberately broken) token for `claims`.
    func mint(_ claims: [String: EmulatorClaims.ClaimValue], audience: String, base: String) async throws -> String {
        var claims = claims
        let now = Int(Date().timeIntervalSince1970)
        let armed = { (mode: TamperMode) async in await state.take(mode, issuer: spec.name) }
        if await armed(.wrongIssuer) {
            // Microsoft: a real issuer URL, but of another tenant than the token's `tid`.
            claims["iss"] = .string(spec.name == "microsoft" ? "\(base)/microsoft/\(MicrosoftDirectory.tenantB.id)/v2.0" : base + "/evil-issuer")
            if spec.name == "microsoft", case .string(MicrosoftDirectory.tenantB.id)? = claims["tid"] {
                claims["iss"] = .string("\(base)/microsoft/\(MicrosoftDirectory.tenantA.id)/v2.0")
            }
        }
        if await armed(.wrongAudience) { claims["aud"] = .string("someone-else") }
        if await armed(.extraAudience) { claims["aud"] = .strings([audience, "untrusted-party"]) }
        if await armed(.expired) {
            claims["iat"] = .number(now - 7200)
            claims["nbf"] = claims["nbf"] == nil ? nil : .number(now - 7200)
            claims["exp"] = .number(now - 3600)
        }
        if await armed(.farExpiry) { claims["exp"] = .number(Int.max) }
        if await armed(.staleAuthTime) { claims["auth_time"] = .number(now - 3600) }
        if await armed(.missingAuthTime) { claims["auth_time"] = nil }
        if await armed(.missingSubject) { claims["sub"] = nil }
        if await armed(.wrongNonce) { claims["nonce"] = .string("not-the-nonce") }
        if await armed(.missingNonce) { claims["nonce"] = nil }
        let payload = EmulatorClaims(claims)
        if await armed(.algNone) {
            let header = SigningKeys.base64URL(Data(#"{"alg":"none","typ":"JWT"}"#.utf8))
            let body = SigningKeys.base64URL((try? JSONEncoder().encode(payload)) ?? Data())
            return "\(header).\(body)."
        }
        if await armed(.hmacWithPublicKey) { return try await keys.signConfused(payload, issuer: spec) }
        var extraHeader: [String: JWTHeaderField] = [:]
        if await armed(.jkuHeader) { extraHeader["jku"] = .string(base + "/evil/jwks") }
        if await armed(.jwkHeader) { extraHeader["jwk"] = .object(["kty": .string("oct"), "k": .string("ZXZpbA")]) }
        var signer = spec
        if let otherTenantSpec, await armed(.otherTenantKey) { signer = otherTenantSpec }
        let signed = try await keys.sign(payload, issuer: signer, extraHeader: extraHeader, withKeyID: !(await armed(.noKeyID)))
        if await armed(.badSignature) {
            // Change one character in the middle of the signature: still base64url, no longer
            // valid. (The last character may carry only padding bits, so it is not used.)
            var parts = signed.split(separator: ".").map(String.init)
            var signature = Array(parts[2])
            let middle = signature.count / 2
            signature[middle] = signature[middle] == "A" ? "B" : "A"
            parts[2] = String(signature)
            return parts.joined(separator: ".")
        }
        return signed
    }
}
