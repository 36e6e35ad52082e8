import Crypto
import Foundation

/// PKCE applied to the one-time sign-in result: the client that starts a flow sends
/// `result_challenge` (base64url SHA-256 of a random verifier); the result is stored under a
/// key derived from its id **and** that challenge, so only a caller presenting the verifier
/// finds it. A result id leaked through a redirect, a log or an open redirector redeems
/// nothing, and a wrong guess does not consume it.
public enum ResultBinding {
    /// The characters RFC 7636 allows in a verifier (unreserved).
    private static let verifierCharacters = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// The start's `result_challenge`, checked: 43 base64url characters (a SHA-256). `nil`
    /// when absent and not `required`.
    public static func challenge(_ value: String?, required: Bool) throws -> String? {
        guard let value else {
            if required {
                throw GatehouseError.invalidArgument(
                    "result_challenge is required: the base64url SHA-256 of a random verifier of 43 to 128 characters, presented as result_verifier when the result is fetched."
                )
            }
            return nil
        }
        guard value.count == 43, Base64URL.decode(value)?.count == 32 else {
            throw GatehouseError.invalidArgument("result_challenge must be the base64url SHA-256 (43 characters, no padding) of the verifier.")
        }
        return value
    }

    /// The challenge of a presented verifier (43–128 unreserved characters, as PKCE's).
    public static func challenge(forVerifier verifier: String) throws -> String {
        guard (43...128).contains(verifier.count), verifier.allSatisfy({ verifierCharacters.contains($0) }) else {
            throw GatehouseError.invalidResult("result_verifier must be 43 to 128 characters of A-Z, a-z, 0-9, '-', '.', '_' and '~'.")
        }
        return Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8))))
    }

    /// Whether `id` has the form of a result id (`SecureRandom.token()`: 43 base64url
    /// characters). Only such an id is looked up: the digest of `<id>|<challenge>` is a bound
    /// result's key, and the same table keeps the consent and app-start entries under digests of
    /// other texts, so an id with any other character could name those keys.
    public static func isResultID(_ id: String) -> Bool {
        id.utf8.count == 43
            && id.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "_"):
                    true
                default: false
                }
            }
    }

    /// Where a result is stored: the digest of its id, bound to the challenge when there is one.
    public static func storageKey(resultID: String, challenge: String?) -> String {
        SecureRandom.digest(challenge.map { "\(resultID)|\($0)" } ?? resultID)
    }
}
