import Foundation

/// Who is calling the signed-in user's routes: a browser with the session cookie, or a
/// client with `Authorization: Bearer <gateway ID token>`. Both lead to one session record.
public struct SessionService: Sendable {
    let storage: any GatehouseStorage
    let tokens: GatewayTokenService
    /// How recent a sign-in must be for sensitive operations.
    let recentLoginWindow: TimeInterval
    /// Where the time comes from.
    let clock: any GatehouseClock

    /// A signed-in caller.
    public struct Caller: Sendable {
        /// The account.
        public var uid: String
        /// When the session's sign-in happened (`auth_time`).
        public var authTime: Date
        /// The session's refresh-token family (`sid`).
        public var familyId: String
        /// Whether the session cookie (not a bearer token) authenticated the call: such
        /// state changes need an allowed `Origin`.
        public var viaCookie: Bool
    }

    /// The caller of a request: a bearer token when an `Authorization` header is sent
    /// (an invalid one is `401`, never a silent fall-back to the cookie), else the cookie.
    public func caller(cookie: String?, authorization: String?) async throws -> Caller? {
        if let authorization {
            guard authorization.count <= 8 << 10, authorization.lowercased().hasPrefix("bearer ") else {
                throw GatehouseError.invalidIdToken("Authorization must be \"Bearer <ID token>\".")
            }
            let bearer = try await tokens.verify(String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces))
            return Caller(
                uid: bearer.session.uid, authTime: Date(timeIntervalSince1970: TimeInterval(bearer.claims.authTime)),
                familyId: bearer.session.familyId, viaCookie: false)
        }
        guard let cookie, !cookie.isEmpty, cookie.count <= 128,
            let session = try await storage.session(idHash: SecureRandom.digest(cookie), now: clock.now())
        else { return nil }
        return Caller(uid: session.uid, authTime: session.createdAt, familyId: session.familyId, viaCookie: true)
    }

    /// Throws `requires-recent-login` unless the caller signed in within the window.
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
            try await storage.deleteSessions(uid: caller.uid)
        } else {
            try await storage.deleteSession(familyId: caller.familyId)
        }
    }

    /// Ends the session behind a cookie value, if any (a new sign-in replaces it).
    public func endSession(cookie value: String?) async throws {
        guard let value, !value.isEmpty, value.count <= 128 else { return }
        try await storage.deleteSession(idHash: SecureRandom.digest(value))
    }
}
