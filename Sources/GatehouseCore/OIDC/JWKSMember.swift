import Foundation
import JWTKit

/// One member of a JWK Set, judged on its own (RFC 7517 §5): a signature-verification key
/// the gateway can use, or the reason it is skipped. One unusable member (an encryption key,
/// a symmetric key, a key type this gateway does not know) never makes the rest unreadable.
enum JWKSMember {
    /// A key to verify ID tokens with, or why not.
    enum Judgement {
        case usable(JWK)
        case skipped(String)
    }

    /// Judges one member of `keys`.
    static func signingKey(_ member: JSONValue) -> Judgement {
        guard case .object = member, let type = member["kty"]?.stringValue else { return .skipped("a member without kty") }
        guard type == "RSA" || type == "EC" else { return .skipped("key type \(type.prefix(16)) is not used for ID tokens") }
        if let use = member["use"]?.stringValue, use != "sig" { return .skipped("a key for \(use.prefix(16)), not signatures") }
        if case .array(let operations)? = member["key_ops"], !operations.contains(where: { $0.stringValue == "verify" }) {
            return .skipped("a key whose key_ops exclude verify")
        }
        guard let data = try? JSONCoding.encoder().encode(member), let key = try? JSONDecoder().decode(JWK.self, from: data) else {
            return .skipped("a malformed \(type) key")
        }
        return .usable(key)
    }

    /// The algorithm a key published without `alg` verifies: an EC key its curve's; an RSA key
    /// the one RSA algorithm in `supported` (discovery's `id_token_signing_alg_values_supported`
    /// that the provider's configuration allows) when there is exactly one, RS256 otherwise (the algorithm every OpenID provider supports,
    /// OpenID Connect Discovery §3). Fixed when the key is loaded: jwt-kit gives a key without
    /// one the algorithm of the first token verified with it, for good, so a single forged
    /// token naming PS512 would otherwise make every genuine RS256 token of that key fail.
    static func algorithm(for key: JWK, supported: [String]?) -> JWK.Algorithm? {
        if key.keyType == .ecdsa {
            switch key.curve?.rawValue {
            case "P-256": return .es256
            case "P-384": return .es384
            case "P-521": return .es512
            default: return nil
            }
        }
        guard key.keyType == .rsa else { return nil }
        let listed = (supported ?? []).filter { $0.hasPrefix("RS") || $0.hasPrefix("PS") }
        return listed.count == 1 ? JWK.Algorithm(rawValue: listed[0]) : .rs256
    }
}
