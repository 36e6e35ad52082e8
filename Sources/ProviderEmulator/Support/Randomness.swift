import Crypto
import Foundation

/// Random values and digests for codes and tokens.
enum Randomness {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

    /// `count` random alphanumerics from the system's secure generator.
    static func alphanumeric(_ count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in alphabet.randomElement(using: &generator)! })
    }

    /// Lower-case hex of `count` random bytes.
    static func hex(_ count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return Hex.string((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// base64url without padding of SHA-256(text): the PKCE S256 transform (RFC 7636 §4.2).
    static func s256(_ text: String) -> String {
        Data(SHA256.hash(data: Data(text.utf8))).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
