import Foundation

/// Who is calling the signed-in user's routes: a browser with the session cookie, or a
/// client with `Authorization: Bearer <gateway ID token>`. Both lead to one session record.
///
/// A class: every signed-in request checks its credential here, and the frame of
/// `GatehouseRequestContext.user()`, which a connection's task keeps while it is open, holds
/// one reference to it rather than a copy of the service, its token service and the whole
/// configuration inside that.
public final class SessionService: Sendable {
    let storage: any GatehouseStorage
    let tokens: GatewayTokenService
    /// How recent a sign-in must be for sensitive operations.
    let recentLoginWindow: TimeInterval
    /// Where the time comes from.
    let clock: any GatehouseClock
    /// Where sign-outs are recorded.
    let audit: AuditLog
    /// The webhook events each write records in its own transaction.
    let events: EventRecorder

    /// Sessions in `storage`, their ID tokens issued and checked by `tokens`.
    init(
        storage: any GatehouseStorage, tokens: GatewayTokenService, recentLoginWindow: TimeInterval, clock: any GatehouseClock,
        audit: AuditLog = .disabled, events: EventRecorder = .disabled
    ) {
        self.storage = storage
        self.tokens = tokens
        self.recentLoginWindow = recentLoginWindow
        self.clock = clock
        self.audit = audit
        self.events = events
    }

    /// A signed-in caller.
    public struct Caller: Sendable {
        /// The account.
        public var uid: String
        /// When the user last authenticated at the provider (`auth_time`): what the recent-login
        /// window counts from (`SessionRecord.authenticatedAt`).
        public var authTime: Date
        /// When the session's sign-in happened.
        public var signedInAt: Date
        /// The session's refresh-token family (`sid`).
        public var familyId: String
        /// Whether the session cookie (not a bearer token) authenticated the call: such
        /// state changes need an allowed `Origin`.
        public var viaCookie: Bool
    }

    /// The caller behind a gateway ID token (`Authorization: Bearer`); an invalid or ended
    /// one is `invalid-id-token`.
    @inline(never)  // a frame of its own, not part of every signed-in route's (`user()`)
    public func caller(idToken: String) async throws -> Caller {
        let bearer = try await tokens.verify(idToken)
        return Caller(
            uid: bearer.session.uid, authTime: Date(timeIntervalSince1970: TimeInterval(bearer.claims.authTime)),
            signedInAt: bearer.session.createdAt, familyId: bearer.session.familyId, viaCookie: false)
    }

    /// The caller behind a session cookie's value, or `nil` when it names no live session.
    @inline(never)  // a frame of its own, not part of every signed-in route's (`user()`)
    public func caller(sessionCookie: String?) async throws -> Caller? {
        guard let sessionCookie, !sessionCookie.isEmpty, sessionCookie.utf8.count <= 128,
            let session = try await storage.session(idHash: SecureRandom.digest(sessionCookie), now: clock.now())
        else { return nil }
        return Caller(
            uid: session.uid, authTime: session.authenticatedAt, signedInAt: session.createdAt, familyId: session.familyId, viaCookie: true)
    }

    /// Throws `requires-recent-login` unless the caller authenticated within the window.
    public func requireRecentLogin(_ caller: Caller) throws {
        guard clock.now().timeIntervalSince(caller.authTime) <= recentLoginWindow else {
            throw GatehouseError.requiresRecentLogin(window: Int(recentLoginWindow))
        }
    }

    /// Ends the caller's session with its refresh tokens (or, with `all`, every session of
    /// the user). Signing out without a session is not an error.
    public func signOut(_ caller: Caller?, all: Bool) async throws {
        guard let caller else { return }
        if all {
            let event = WebhookEvent.account(.signedOutEverywhere, uid: caller.uid, at: clock.now())
            _ = try await events.recording([event]) { try await storage.deleteSessions(uid: caller.uid, now: clock.now()) }
        } else {
            try await storage.deleteSession(familyId: caller.familyId)
        }
        audit.record(all ? .signedOutEverywhere : .signedOut, by: .user(caller.uid), uid: caller.uid)
    }

    /// Ends the session behind a cookie value, if any (a new sign-in replaces it).
    public func endSession(cookie value: String?) async throws {
        guard let value, !value.isEmpty, value.utf8.count <= 128 else { return }
        try await storage.deleteSession(idHash: SecureRandom.digest(value))
    }
}
