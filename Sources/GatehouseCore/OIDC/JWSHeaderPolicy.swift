import Foundation

/// The header rules every JWT the gateway verifies must pass before its signature is
/// checked (design §4), shared by provider ID tokens and the gateway's own: a compact JWS,
/// an algorithm from the allow-list (never `none`), no key named by the token itself
/// (`jku`, `jwk`, `x5u`, `x5c`) and no critical parameters.
enum JWSHeaderPolicy {
    /// Header parameters that would let a token choose its own verification key.
    static let keyInjectionHeaders = ["jku", "jwk", "x5u", "x5c"]

    /// The token's `kid`, once its header passed; otherwise `invalid-id-token`.
    static func check(_ token: String, maxLength: Int, algorithms: Set<String>) throws -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.count <= maxLength, parts.count == 3, let headerData = Base64URL.decode(String(parts[0])),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any]
        else {
            throw GatehouseError.invalidIdToken("The ID token is not a compact JWS.")
        }
        guard let alg = header["alg"] as? String, algorithms.contains(alg) else {
            throw GatehouseError.invalidIdToken("The ID token's algorithm is not accepted.")
        }
        if let injected = keyInjectionHeaders.first(where: { header[$0] != nil }) {
            throw GatehouseError.invalidIdToken("The ID token names its own key (\(injected)); only the issuer's published keys are used.")
        }
        if header["crit"] != nil {
            throw GatehouseError.invalidIdToken("The ID token has critical header parameters the gateway does not understand.")
        }
        return header["kid"] as? String
    }
}
