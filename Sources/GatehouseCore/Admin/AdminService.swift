import Foundation

/// The operators' and internal services' account operations (`/v1/users…` with the `admin`
/// scope): lookup by email, disable, enable, revoke sessions. Reading profiles and photos
/// stays with `ProfileService`.
public struct AdminService: Sendable {
    let storage: any GatehouseStorage
    let accounts: AccountService
    /// Where disabling, enabling and session revocation are recorded.
    var audit = AuditLog.disabled
    /// The webhook events each write records in its own transaction.
    var events = EventRecorder.disabled
    /// Where event times and session lifetimes are read (the deployment's clock).
    var clock: any GatehouseClock = SystemClock()

    /// The accounts with this email (admin search), oldest first, at most 100: by default only
    /// those a provider vouches for it (`emailVerified`), as one-account-per-email matches;
    /// `includeUnverified` adds accounts whose provider merely claims it, each marked, so a
    /// service mapping an email to a user is not pointed at whoever typed the address first.
    public func lookup(email: String, includeUnverified: Bool = false) async throws -> [EmailMatch] {
        let trimmed = email.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count <= 320, trimmed.contains("@"), let normalized = EmailAddress.normalized(trimmed) else {
            throw GatehouseError.invalidArgument("email must be an email address.")
        }
        let verifiedUIDs = try await storage.uids(verifiedEmail: normalized, limit: 100)
        let verified = Set(verifiedUIDs)
        var result: [EmailMatch] = []
        for uid in includeUnverified ? try await storage.uids(email: trimmed, limit: 100) : verifiedUIDs {
            if let account = try await storage.account(uid: uid) {
                result.append(
                    EmailMatch(profile: try await accounts.unifiedProfile(for: account, reader: .service), verified: verified.contains(uid)))
            }
        }
        return result
    }

    /// Disables or enables an account; disabling also ends its sessions (each time: a session a
    /// sign-in created while the account was being disabled goes too). Setting the value the
    /// account already has sends no webhook event (nothing changed for the app to hear), but
    /// is on the audit record like every operator's write.
    public func setDisabled(uid: String, disabled: Bool, by actor: AuditActor) async throws {
        let event = WebhookEvent.account(disabled ? .accountDisabled : .accountEnabled, uid: uid, at: clock.now())
        guard try await events.recording([event], { try await storage.setDisabled(uid: uid, disabled: disabled) }) != .notFound else {
            throw GatehouseError.userNotFound()
        }
        audit.record(disabled ? .accountDisabled : .accountEnabled, by: actor, uid: uid)
    }

    /// Puts an operator's opening of the console on the audit record.
    public func consoleOpened(by uid: String) {
        audit.record(.consoleOpened, by: .operator(uid), uid: uid)
    }

    /// Makes the undelivered webhook event `id` (a delivery's id) due now, on the audit record;
    /// `not-found` when there is none (delivered, dropped, or being sent right now). The
    /// caller wakes the dispatcher.
    public func redeliver(_ id: String, by actor: AuditActor) async throws {
        guard id.utf8.count <= 256, try await storage.redeliverOutbox(id: id, now: clock.now()) else {
            throw GatehouseError(code: .notFound, detail: "There is no undelivered event with this id.")
        }
        audit.record(.webhookRedelivered, by: actor, delivery: id)
    }

    /// Accounts an operator's search finds, a page after the cursor (a uid), with the
    /// cursor of the next page (`nil` on the last).
    public func search(_ search: AccountSearch, after cursor: String?, limit: Int) async throws -> (
        users: [UnifiedProfile], nextCursor: String?
    ) {
        let uids = try await storage.searchAccounts(search, after: cursor, limit: limit)
        var users: [UnifiedProfile] = []
        for uid in uids {
            if let account = try await storage.account(uid: uid) { users.append(try await accounts.unifiedProfile(for: account, reader: .service)) }
        }
        return (users, uids.count == limit ? uids.last : nil)
    }

    /// Stored audit events, newest first, of one account and one event type when given, a
    /// page below the cursor (an event id), with the cursor of the next page (`nil` on the last).
    /// With `listable`, only the events it admits: a page may then hold fewer than `limit`
    /// (or none) and still have a next one.
    public func activity(
        uid: String?, event: String?, cursor: String?, limit: Int, listable: (@Sendable (String) -> Bool)? = nil
    ) async throws -> (events: [AuditRecord], nextCursor: String?) {
        if let event, let listable, !listable(event) {
            throw GatehouseError(
                code: .permissionDenied,
                detail: "This service key may not list \(event) events (key events need admin:keys, webhook events admin:webhooks).")
        }
        var before: Int64?
        if let cursor {
            // Any event id is a position (below 0 is an empty last page); 18 digits always fit.
            guard cursor.utf8.count <= 18, cursor.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int64(cursor) else {
                throw GatehouseError.invalidArgument("cursor must be the nextCursor of a previous page.")
            }
            before = value
        }
        let events = try await storage.auditRecords(uid: uid, event: event, before: before, limit: limit)
        let next = events.count == limit ? events.last.map { String($0.id) } : nil
        guard let listable else { return (events, next) }
        return (events.filter { listable($0.event) }, next)
    }

    /// An account's live sessions, newest first.
    public func sessions(uid: String) async throws -> [SessionRecord] {
        guard try await storage.account(uid: uid) != nil else { throw GatehouseError.userNotFound() }
        return try await storage.sessions(uid: uid, now: clock.now())
    }

    /// An account's live sessions, newest first and at most `SessionRecord.listLimit`, each with
    /// its last recorded use; and how many it has in all (more than listed when the list stops).
    public func sessionsWithUses(uid: String) async throws -> (sessions: [(session: SessionRecord, use: SessionUse?)], total: Int) {
        let sessions = try await self.sessions(uid: uid)
        let uses = try await storage.sessionUses(familyIds: sessions.map(\.familyId))
        // Counted only when the list may have stopped short; sessions that expired between
        // the two reads never make the total smaller than the list.
        let total =
            sessions.count < SessionRecord.listLimit
            ? sessions.count : max(sessions.count, try await storage.sessionCount(uid: uid, now: clock.now()))
        return (sessions.map { ($0, uses[$0.familyId]) }, total)
    }

    /// Ends one session of an account (`sessionId`: its `sid`); `not-found` when the account
    /// has no such live session.
    public func revokeSession(uid: String, sessionId: String, by actor: AuditActor) async throws {
        guard sessionId.utf8.count <= 64, let session = try await storage.session(familyId: sessionId, now: clock.now()), session.uid == uid else {
            throw GatehouseError(code: .notFound, detail: "This account has no live session with this id.")
        }
        try await storage.deleteSession(familyId: sessionId)
        audit.record(.sessionRevoked, by: actor, uid: uid)
    }

    /// Ends every session of an account.
    public func revokeSessions(uid: String, by actor: AuditActor) async throws {
        guard try await storage.account(uid: uid) != nil else { throw GatehouseError.userNotFound() }
        // The event only when a session ended: revoking none changes nothing a receiver tracks.
        _ = try await events.recording([.account(.sessionsRevoked, uid: uid, at: clock.now())]) {
            try await storage.deleteSessions(uid: uid, now: clock.now())
        }
        audit.record(.sessionsRevoked, by: actor, uid: uid)
    }
}
