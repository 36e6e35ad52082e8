import Logging

/// What the audit trail records: the security-relevant changes to accounts, sessions and
/// keys, one structured log line each.
public enum AuditEvent: String, Sendable, CaseIterable {
    /// A first sign-in created an account.
    case accountCreated = "account.created"
    /// An identity was linked to an account (`mode=link`, a claimed pending credential).
    case providerLinked = "provider.linked"
    /// An identity was removed from an account.
    case providerUnlinked = "provider.unlinked"
    /// A linked identity signed in again for a sensitive operation (`mode=reauthenticate`).
    case reauthenticated = "account.reauthenticated"
    /// One session ended at its user's request.
    case signedOut = "session.signed-out"
    /// Every session of an account ended at its user's request (`?all=true`).
    case signedOutEverywhere = "session.signed-out-all"
    /// An account was deleted by its user.
    case accountDeleted = "account.deleted"
    /// An administrator disabled an account (its sessions end with it).
    case accountDisabled = "account.disabled"
    /// An administrator enabled an account.
    case accountEnabled = "account.enabled"
    /// An account's custom claims changed (a hook's answer, `PUT /v1/users/{uid}/claims`).
    case claimsUpdated = "account.claims-updated"
    /// An administrator ended one session of an account.
    case sessionRevoked = "session.revoked"
    /// An administrator ended every session of an account.
    case sessionsRevoked = "account.sessions-revoked"
    /// A service key was created.
    case serviceKeyCreated = "service-key.created"
    /// A service key was revoked.
    case serviceKeyRevoked = "service-key.revoked"
    /// A new signing key was added (rotation).
    case signingKeyRotated = "signing-key.rotated"
    /// The stored secrets were re-encrypted under the current key (rotation).
    case encryptionKeyRotated = "encryption-key.rotated"
    /// A provider API call was made with a user's stored grant (passthrough).
    case providerAPICalled = "provider-api.called"
    /// A user's provider access token was handed to a service (token vault).
    case providerTokenIssued = "provider-token.issued"
    /// An undelivered webhook event was made due again by an operator or a service key.
    case webhookRedelivered = "webhook.redelivered"
    /// An operator opened the console (its cookie was set).
    case consoleOpened = "console.opened"

    /// The admin scope a service key needs to list the event (`GET /v1/admin/activity`): the
    /// scope of the administration it records. `admin` covers them all.
    public var listingScope: String {
        switch self {
        case .serviceKeyCreated, .serviceKeyRevoked, .signingKeyRotated, .encryptionKeyRotated: "admin:keys"
        case .webhookRedelivered: "admin:webhooks"
        default: "admin:users"
        }
    }

    /// Whether a key holding `scopes` may list events of type `event` (a type this version does
    /// not know as any account event: `admin:users`).
    public static func listable(_ event: String, by scopes: [String]) -> Bool {
        scopes.contains("admin") || scopes.contains(AuditEvent(rawValue: event)?.listingScope ?? "admin:users")
    }
}

/// What a passthrough call did, for its audit line: the method, the allowed template (never
/// the raw path, which may carry identifiers) and the status answered.
public struct AuditedCall: Sendable {
    /// `GET`
    public var method: String
    /// `GET /v1.0/me/events`
    public var template: String
    /// The status the caller got.
    public var status: Int
}

/// Who made an audited change.
public enum AuditActor: Sendable, Equatable {
    /// The signed-in user (uid).
    case user(String)
    /// An internal service, by service key id.
    case serviceKey(String)
    /// An operator on the command line (`gatehouse keys …`).
    case commandLine
    /// The app's blocking hook (its answer's `customClaims`).
    case hook
    /// An operator in the console, by uid.
    case `operator`(String)

    /// `user:<uid>`, `service-key:<id>`, `command-line`, `hook` or `operator:<uid>`.
    public var description: String {
        switch self {
        case .user(let uid): "user:\(uid)"
        case .serviceKey(let id): "service-key:\(id)"
        case .commandLine: "command-line"
        case .hook: "hook"
        case .operator(let uid): "operator:\(uid)"
        }
    }
}

/// Writes audit events as log lines: message `audit`, `"audit": true`, the event, the actor,
/// the target account and provider (and the request's id, which the log handler adds). Never
/// a secret: only ids. Written whatever the log level (an operator lowering verbosity must
/// not lose the trail).
public struct AuditLog: Sendable {
    private let logger: Logger?
    /// Where events are also stored for the activity listing, if anywhere.
    private let trail: AuditTrail?
    private let clock: any GatehouseClock

    /// Audits into `logger`, and into `trail` when given.
    public init(logger: Logger, trail: AuditTrail? = nil, clock: any GatehouseClock = SystemClock()) {
        var logger = logger
        logger.logLevel = .trace
        self.logger = logger
        self.trail = trail
        self.clock = clock
    }

    private init() {
        logger = nil
        trail = nil
        clock = SystemClock()
    }

    /// Records nothing (unit tests, tools without a trail).
    public static let disabled = AuditLog()

    /// Writes one event.
    /// `delivery` (a webhook delivery's id) is written to the log line only.
    public func record(
        _ event: AuditEvent, by actor: AuditActor, uid: String? = nil, provider: String? = nil, keyId: String? = nil, call: AuditedCall? = nil,
        delivery: String? = nil
    ) {
        guard let logger else { return }
        var metadata = Logger.Metadata(minimumCapacity: 9)  // every member at once, no rehash
        metadata["audit"] = .stringConvertible(true)
        metadata["audit.event"] = .string(event.rawValue)
        metadata["audit.actor"] = .string(actor.description)
        if let uid { metadata["user.id"] = .string(uid) }
        if let provider { metadata["provider.id"] = .string(provider) }
        if let keyId { metadata["key.id"] = .string(keyId) }
        if let delivery { metadata["webhook.delivery"] = .string(delivery) }
        if let call {
            metadata["api.method"] = .string(call.method)
            metadata["api.template"] = .string(call.template)
            metadata["api.status"] = .stringConvertible(call.status)
        }
        logger.notice("audit", metadata: metadata)
        if let trail, AuditTrail.keeps(event) {
            trail.append(
                AuditRecord(at: clock.now(), event: event.rawValue, actor: actor.description, uid: uid, provider: provider, keyId: keyId))
        }
    }
}
