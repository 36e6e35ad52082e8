import Foundation

/// The header rules every JWT the gateway verifies must pass before its signature is
/// checked (design §4), shared by provider ID tokens and the gateway's own: a compact JWS,
/// an algorithm from the allow-list (never `none`), no key named by the token itself
/// (`jku`, `jwk`, `x5u`, `x5c`) and no critical parameters.
enum JWSHeaderPolicy {
    /// Header parameters that would let a token choose its own verification key.
    static let keyInjectionHeaders = ["jku", "jwk", "x5u", "x5c"]

    /// The token's `kid` and `alg`, once its header passed; otherwise `invalid-id-token`.
    static func check(_ token: String, maxLength: Int, algorithms: Set<String>) throws -> (kid: String?, alg: String) {
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard token.utf8.count <= maxLength, parts.count == 3, let headerData = Base64URL.decode(String(decoding: parts[0], as: UTF8.self)),
            let header = try? JSONDecoder().decode(Header.self, from: headerData)
        else {
            throw GatehouseError.invalidIdToken("The ID token is not a compact JWS.")
        }
        guard let alg = header.alg, algorithms.contains(alg) else {
            throw GatehouseError.invalidIdToken("The ID token's algorithm is not accepted.")
        }
        if let injected = header.keyInjection {
            throw GatehouseError.invalidIdToken("The ID token names its own key (\(injected)); only the issuer's published keys are used.")
        }
        if header.critical {
            throw GatehouseError.invalidIdToken("The ID token has critical header parameters the gateway does not understand.")
        }
        return (header.kid, alg)
    }

    /// What the rules look at in a JOSE header. Decoded as jwt-kit decodes it (JSONDecoder,
    /// so duplicate members resolve the same way), and without Foundation's
    /// JSONSerialization, which cost a twentieth of a bearer request (perf, release build).
    private struct Header: Decodable {
        let alg: String?
        let kid: String?
        /// The first key-injection parameter present.
        let keyInjection: String?
        /// Whether `crit` is present.
        let critical: Bool

        private struct Member: CodingKey {
            let stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(from decoder: any Decoder) throws {
            let members = try decoder.container(keyedBy: Member.self)
            // A member of another type is as good as absent: `alg` then fails the allow-list.
            alg = try? members.decode(String.self, forKey: Member(stringValue: "alg"))
            kid = try? members.decode(String.self, forKey: Member(stringValue: "kid"))
            keyInjection = JWSHeaderPolicy.keyInjectionHeaders.first { members.contains(Member(stringValue: $0)) }
            critical = members.contains(Member(stringValue: "crit"))
        }
    }
}
