import Foundation

/// One stored audit event: what the console's activity page and `GET /v1/admin/activity` list.
public struct AuditRecord: Sendable, Equatable {
    /// The store's sequence number (0 before it is stored): newer events have larger ids.
    public var id: Int64
    /// When it happened.
    public var at: Date
    /// The event (`AuditEvent`'s raw value, `account.disabled`).
    public var event: String
    /// Who made the change (`AuditActor.description`).
    public var actor: String
    /// The account it concerns, if any.
    public var uid: String?
    /// The provider it concerns, if any.
    public var provider: String?
    /// The key it concerns (a service key's or a signing key's id), if any.
    public var keyId: String?

    /// A record; `id` is the store's to assign.
    public init(id: Int64 = 0, at: Date, event: String, actor: String, uid: String? = nil, provider: String? = nil, keyId: String? = nil) {
        self.id = id
        self.at = at
        self.event = event
        self.actor = actor
        self.uid = uid
        self.provider = provider
        self.keyId = keyId
    }
}
