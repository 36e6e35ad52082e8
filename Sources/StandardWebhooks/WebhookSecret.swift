import Crypto
import Foundation

/// A Standard Webhooks signing secret: `whsec_` followed by the base64 of 24 to 64 random
/// bytes, the form every Standard Webhooks library reads.
public struct WebhookSecret: Sendable, Equatable, CustomStringConvertible {
    /// The prefix of the written form.
    public static let prefix = "whsec_"

    /// The HMAC key.
    let key: SymmetricKey

    /// Reads `whsec_<base64>`; `nil` for anything else (no prefix, bad base64, a key shorter
    /// than 24 bytes or longer than 64).
    public init?(_ text: String) {
        guard text.hasPrefix(Self.prefix), let bytes = Data(base64Encoded: String(text.dropFirst(Self.prefix.count))),
            (24...64).contains(bytes.count)
        else { return nil }
        key = SymmetricKey(data: bytes)
    }

    /// A new random secret (32 bytes).
    public static func random() -> WebhookSecret {
        WebhookSecret(key: SymmetricKey(size: .bits256))
    }

    private init(key: SymmetricKey) {
        self.key = key
    }

    /// The written form, `whsec_…` (a secret: never log it).
    public var text: String {
        Self.prefix + key.withUnsafeBytes { Data($0).base64EncodedString() }
    }

    /// Never the key itself.
    public var description: String { "whsec_…" }

    /// Two secrets are equal when their keys are.
    public static func == (lhs: WebhookSecret, rhs: WebhookSecret) -> Bool {
        lhs.key == rhs.key
    }

    /// `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
    func signature(id: String, timestamp: Int, body: some DataProtocol) -> String {
        var hmac = HMAC<SHA256>(key: key)
        hmac.update(data: Data("\(id).\(timestamp).".utf8))
        hmac.update(data: body)
        return "v1," + Data(hmac.finalize()).base64EncodedString()
    }
}
