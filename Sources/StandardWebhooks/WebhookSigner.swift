import Foundation

/// Signs webhook requests the Standard Webhooks way (`webhook-id`, `webhook-timestamp`,
/// `webhook-signature`), with every configured secret: during a rotation the receiver
/// accepts whichever of its secrets it already knows.
public struct WebhookSigner: Sendable {
    /// The secrets, each of which signs.
    public let secrets: [WebhookSecret]

    /// Signs with `secrets` (at least one).
    public init(secrets: [WebhookSecret]) {
        precondition(!secrets.isEmpty, "a webhook signer needs a secret")
        self.secrets = secrets
    }

    /// The three headers of a message with this id, time (seconds since 1970) and body.
    public func headers(id: String, timestamp: Int, body: some DataProtocol) -> [(name: String, value: String)] {
        let signatures = secrets.map { $0.signature(id: id, timestamp: timestamp, body: body) }
        return [
            ("webhook-id", id),
            ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", signatures.joined(separator: " ")),
        ]
    }
}
