import Crypto
import Foundation

/// Proof Key for Code Exchange with the S256 method (RFC 7636), used on every flow.
public struct PKCE: Sendable {
    /// The secret verifier: 32 random bytes, base64url (43 characters).
    public let verifier: String
    /// `BASE64URL(SHA256(verifier))`, sent on the authorize request.
    public var challenge: String { Self.challenge(for: verifier) }

    /// A fresh verifier.
    public init() {
        verifier = SecureRandom.token(byteCount: 32)
    }

    /// The S256 challenge of a verifier.
    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(SHA256.hash(data: Data(verifier.utf8)))
    }
}
