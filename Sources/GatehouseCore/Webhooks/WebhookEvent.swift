import Foundation

/// One event: `{"type","id","timestamp","data"}` — the uid and what changed, never a token,
/// a secret or a provider's raw answer. Its id is stable across retries, for the receiver to
/// drop duplicates (delivery is at least once).
public struct WebhookEvent: Sendable, Encodable {
    /// What happened.
    public var type: WebhookEventType
    /// `evt_` and then the change's time (milliseconds since 1970, 12 lower-case hex digits)
    /// and 16 random characters: unique, also the `webhook-id` header. Ids sort by the time
    /// of their change, so the outbox, which pages in id order, lists the oldest first.
    public var id: String
    /// When the change was made.
    public var timestamp: Date
    /// The uid and what changed.
    public var data: [String: JSONValue]

    /// An event of `type` at `timestamp` with a new id.
    public init(_ type: WebhookEventType, at timestamp: Date, data: [String: JSONValue]) {
        self.type = type
        self.id = Self.newId(at: timestamp)
        self.timestamp = timestamp
        self.data = data
    }

    /// A new id for an event of `timestamp` (see `id`); times outside 1970 to the year 10889
    /// are held at those ends.
    static func newId(at timestamp: Date) -> String {
        let milliseconds = (timestamp.timeIntervalSince1970 * 1000).rounded(.down)
        let clamped = UInt64(max(0, min(milliseconds, Double((1 << 48) - 1))))
        let hex = String(clamped, radix: 16)
        return "evt_" + String(repeating: "0", count: 12 - hex.count) + hex + SecureRandom.token(byteCount: 12)
    }

    /// An account's event: `data.uid` and the other members given.
    public static func account(_ type: WebhookEventType, uid: String, at date: Date, _ more: [String: JSONValue] = [:]) -> WebhookEvent {
        WebhookEvent(type, at: date, data: more.merging(["uid": .string(uid)]) { _, uid in uid })
    }
}
