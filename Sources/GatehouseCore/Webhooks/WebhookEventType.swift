/// What a webhook reports (the audit trail's names where it has one).
public enum WebhookEventType: String, Sendable, CaseIterable, Codable {
    /// A first sign-in created an account (never a returning one).
    case accountCreated = "account.created"
    /// A sign-in or re-authentication started a session (the first one included).
    case accountSignedIn = "account.signed-in"
    /// An identity was linked to an account.
    case providerLinked = "provider.linked"
    /// An identity was removed from an account.
    case providerUnlinked = "provider.unlinked"
    /// A linked profile or the custom claims changed.
    case accountUpdated = "account.updated"
    /// An administrator disabled the account.
    case accountDisabled = "account.disabled"
    /// An administrator enabled the account.
    case accountEnabled = "account.enabled"
    /// The account was deleted.
    case accountDeleted = "account.deleted"
    /// The user ended every session of the account.
    case signedOutEverywhere = "session.signed-out-all"
    /// An administrator ended every session of the account.
    case sessionsRevoked = "account.sessions-revoked"
    /// The provider refused the stored grant's refresh: the user must reconnect it.
    case grantReauthRequired = "grant.reauth-required"
    /// The user signed in again with a provider whose grant had died.
    case grantRestored = "grant.restored"
    /// A service key was created.
    case serviceKeyCreated = "service-key.created"
    /// A service key was revoked.
    case serviceKeyRevoked = "service-key.revoked"

    /// The admin scope a service key needs to read the event's payload in the delivery listing
    /// (`GET /v1/admin/webhooks/deliveries`), as for the same administration in the activity
    /// listing (`AuditEvent.listingScope`): key administration `admin:keys`, accounts
    /// `admin:users`. `admin` covers them all.
    public var readingScope: String {
        switch self {
        case .serviceKeyCreated, .serviceKeyRevoked: "admin:keys"
        default: "admin:users"
        }
    }

    /// Whether a key holding `scopes` may read the payload of an event of type `type` (a type
    /// this version does not know as an account event: `admin:users`).
    public static func readable(_ type: String, by scopes: [String]) -> Bool {
        scopes.contains("admin") || scopes.contains(WebhookEventType(rawValue: type)?.readingScope ?? "admin:users")
    }
}
