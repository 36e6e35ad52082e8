import Foundation

/// One event: `{"type","id","timestamp","data"}` — the uid and what changed, never a token,
/// a secret or a provider's raw answer. Its id is stable across retries, for the receiver to
/// drop duplicates (delivery is at least once).
public struct WebhookEvent: Sendable, Encodable {
    /// What happened.
    public var type: WebhookEventType
    /// `evt_…`, unique, also the `webhook-id` header.
    public var id: String
    /// When the change was made.
    public var timestamp: Date
    /// The uid and what changed.
    public var data: [String: JSONValue]

    /// An event of `type` at `timestamp` with a new id.
    public init(_ type: WebhookEventType, at timestamp: Date, data: [String: JSONValue]) {
        self.type = type
        self.id = "evt_" + SecureRandom.token(byteCount: 16)
        self.timestamp = timestamp
        self.data = data
    }

    /// An account's event: `data.uid` and the other members given.
    public static func account(_ type: WebhookEventType, uid: String, at date: Date, _ more: [String: JSONValue] = [:]) -> WebhookEvent {
        WebhookEvent(type, at: date, data: more.merging(["uid": .string(uid)]) { _, uid in uid })
    }
}
