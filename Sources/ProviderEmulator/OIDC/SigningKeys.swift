import Crypto
import Foundation
import JWTKit
import _CryptoExtras

/// The emulated issuers' signing keys, with jwt-kit doing the signing.
///
/// `rotate()` replaces every issuer's key and drops the old one from its JWKS, so a client
/// that caches keys must refetch on the unknown `kid` (Core §10.1.1).
actor SigningKeys {
    /// A current key of one issuer.
    private struct Key {
        let kid: String
        let collection: JWTKeyCollection
        let publicJWK: [String: String]
        let publicPEM: String
    }

    private var keys: [String: Key] = [:]
    /// Keys being made, one per issuer: concurrent first callers wait for the same one.
    private var making: [String: Task<Key, any Error>] = [:]
    private var generation = 0

    /// Signs `claims` with the issuer's current key; `header` fields are added (tamper modes).
    func sign(
        _ claims: EmulatorClaims, issuer spec: OIDCIssuerSpec, extraHeader: [String: JWTHeaderField] = [:], withKeyID: Bool = true
    ) async throws -> String {
        let key = try await current(spec)
        var header = JWTHeader()
        header.typ = "JWT"
        for (name, value) in extraHeader { header.fields[name] = value }
        // Without a kid, jwt-kit signs with the collection's only (default) key.
        return try await key.collection.sign(claims, kid: withKeyID ? JWKIdentifier(string: key.kid) : nil, header: header)
    }

    /// The issuer's JWK Set (public parts only).
    func jwks(_ spec: OIDCIssuerSpec) async throws -> [String: [[String: String]]] {
        ["keys": [try await current(spec).publicJWK]]
    }

    /// Signs with HS256 keyed by the issuer's public key PEM, under the real key's `kid`:
    /// the classic algorithm-confusion attack a verifier must refuse.
    func signConfused(_ claims: EmulatorClaims, issuer spec: OIDCIssuerSpec) async throws -> String {
        let key = try await current(spec)
        let confused = JWTKeyCollection()
        await confused.add(hmac: HMACKey(from: key.publicPEM), digestAlgorithm: .sha256, kid: JWKIdentifier(string: key.kid))
        return try await confused.sign(claims, kid: JWKIdentifier(string: key.kid))
    }

    /// New keys for every issuer; the old ones are gone from every JWKS.
    func rotate() -> Int {
        generation += 1
        let count = keys.count
        keys.removeAll()
        making.removeAll()
        return count
    }

    /// The issuer's key of this generation, made once. An RSA key takes a second or more to
    /// make in a debug build under load: when every concurrent first caller made its own in
    /// turn on this actor, 20 simultaneous first sign-ins waited past the gateway's timeout.
    private func current(_ spec: OIDCIssuerSpec) async throws -> Key {
        if let key = keys[spec.name] { return key }
        let started = generation
        let task: Task<Key, any Error>
        if let running = making[spec.name] {
            task = running
        } else {
            let kid = "\(spec.name)-\(generation)-\(Randomness.hex(8))"
            // Made off the actor, so signing with other issuers' keys goes on meanwhile.
            task = Task.detached { try await Self.makeKey(spec, kid: kid) }
            making[spec.name] = task
        }
        let key = try await task.value
        // Keys rotated meanwhile: this one is already gone from the JWKS.
        guard generation == started else { return try await current(spec) }
        if let stored = keys[spec.name] { return stored }
        keys[spec.name] = key
        making[spec.name] = nil
        return key
    }

    private static func makeKey(_ spec: OIDCIssuerSpec, kid: String) async throws -> Key {
        let collection = JWTKeyCollection()
        let jwk: [String: String]
        let pem: String
        if spec.algorithm == "ES256" {
            let privateKey = ES256PrivateKey()
            await collection.add(ecdsa: privateKey, kid: JWKIdentifier(string: kid))
            guard let parameters = privateKey.publicKey.parameters else { throw EmulatorKeyError() }
            pem = privateKey.publicKey.pemRepresentation
            jwk = ["kty": "EC", "crv": "P-256", "x": parameters.x, "y": parameters.y, "kid": kid, "alg": "ES256", "use": "sig"]
        } else {
            let privateKey = try Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
            await collection.add(rsa: privateKey, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
            let (modulus, exponent) = try privateKey.publicKey.getKeyPrimitives()
            pem = privateKey.publicKey.pemRepresentation
            jwk = [
                "kty": "RSA", "n": Self.base64URL(modulus), "e": Self.base64URL(exponent), "kid": kid, "alg": "RS256", "use": "sig",
            ]
        }
        return Key(kid: kid, collection: collection, publicJWK: jwk, publicPEM: pem)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// A key could not be made.
struct EmulatorKeyError: Error {}

/// ID-token claims as a free-form JSON object.
struct EmulatorClaims: JWTPayload {
    /// The claims; values are strings, numbers, booleans or arrays of strings.
    var values: [String: ClaimValue]

    /// One claim value.
    enum ClaimValue: Codable, Sendable {
        case string(String)
        case number(Int)
        case bool(Bool)
        case strings([String])

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let value): try container.encode(value)
            case .number(let value): try container.encode(value)
            case .bool(let value): try container.encode(value)
            case .strings(let value): try container.encode(value)
            }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(Int.self) {
                self = .number(value)
            } else if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode([String].self) {
                self = .strings(value)
            } else {
                self = .string(try container.decode(String.self))
            }
        }
    }

    init(_ values: [String: ClaimValue]) { self.values = values }

    func encode(to encoder: any Encoder) throws { try values.encode(to: encoder) }

    init(from decoder: any Decoder) throws { values = try [String: ClaimValue](from: decoder) }

    func verify(using algorithm: some JWTAlgorithm) throws {}
}
