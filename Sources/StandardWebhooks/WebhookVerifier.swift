import Crypto
import Foundation

/// Checks a Standard Webhooks message: the signature over `id.timestamp.body` by one of the
/// receiver's secrets, and a timestamp within the tolerance (a replayed old message fails).
///
/// ```swift
/// let verifier = WebhookVerifier(secrets: [WebhookSecret("whsec_…")!])
/// try verifier.verify(headers: request.headers, body: body)
/// ```
public struct WebhookVerifier: Sendable {
    /// The secrets a valid signature may come from.
    public let secrets: [WebhookSecret]
    /// How far the message's timestamp may be from now, either way (default 5 minutes).
    public let tolerance: TimeInterval

    /// Verifies against `secrets` (at least one).
    public init(secrets: [WebhookSecret], tolerance: TimeInterval = 300) {
        precondition(!secrets.isEmpty, "a webhook verifier needs a secret")
        self.secrets = secrets
        self.tolerance = tolerance
    }

    /// Verifies a message; `header` looks a header up by its lower-case name. Throws
    /// ``WebhookVerificationError`` naming what failed.
    public func verify(header: (String) -> String?, body: some DataProtocol, now: Date = Date()) throws {
        guard let id = header("webhook-id"), !id.isEmpty else { throw WebhookVerificationError.missingHeader("webhook-id") }
        guard let timestampText = header("webhook-timestamp") else { throw WebhookVerificationError.missingHeader("webhook-timestamp") }
        guard let signatures = header("webhook-signature") else { throw WebhookVerificationError.missingHeader("webhook-signature") }
        guard let timestamp = Int(timestampText) else { throw WebhookVerificationError.invalidTimestamp }
        guard abs(now.timeIntervalSince1970 - Double(timestamp)) <= tolerance else { throw WebhookVerificationError.timestampOutOfTolerance }
        let offered = signatures.split(separator: " ").compactMap { entry -> Data? in
            guard entry.hasPrefix("v1,") else { return nil }
            return Data(base64Encoded: String(entry.dropFirst(3)))
        }
        for secret in secrets {
            let expected = secret.signature(id: id, timestamp: timestamp, body: body)
            guard let expectedBytes = Data(base64Encoded: String(expected.dropFirst(3))) else { continue }
            for candidate in offered where candidate.count == expectedBytes.count {
                // Constant time: the comparison must not tell how many leading bytes matched.
                if zip(candidate, expectedBytes).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0 { return }
            }
        }
        throw WebhookVerificationError.noMatchingSignature
    }

    /// Verifies a message whose headers are given as name–value pairs (names compared
    /// case-insensitively).
    public func verify(headers: [(name: String, value: String)], body: some DataProtocol, now: Date = Date()) throws {
        try verify(header: { name in headers.first { $0.name.lowercased() == name }?.value }, body: body, now: now)
    }
}

/// Why a webhook message did not verify.
public enum WebhookVerificationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A required header is absent.
    case missingHeader(String)
    /// `webhook-timestamp` is not a whole number of seconds.
    case invalidTimestamp
    /// The message is older (or newer) than the tolerance allows.
    case timestampOutOfTolerance
    /// No signature was made by one of the secrets.
    case noMatchingSignature

    /// What failed, for logs.
    public var description: String {
        switch self {
        case .missingHeader(let name): "the \(name) header is missing"
        case .invalidTimestamp: "webhook-timestamp is not a number of seconds"
        case .timestampOutOfTolerance: "webhook-timestamp is too far from now"
        case .noMatchingSignature: "no signature matches a known secret"
        }
    }
}
