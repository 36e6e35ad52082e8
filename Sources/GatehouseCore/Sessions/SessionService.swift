import Foundation

/// Browser sessions: the cookie value is a random secret; only its hash is stored.
public struct SessionService: Sendable {
    let storage: any GatehouseStorage

    /// The account uid of a live session, or `nil`.
    public func uid(forSession value: String?) async throws -> String? {
        guard let value, !value.isEmpty, value.count <= 128 else { return nil }
        return try await storage.session(idHash: SecureRandom.digest(value), now: Date())?.uid
    }

    /// Ends the session (or, with `all`, every session of its user). Unknown values are fine:
    /// signing out twice is not an error.
    public func signOut(session value: String?, all: Bool) async throws {
        guard let value, !value.isEmpty, value.count <= 128 else { return }
        let hash = SecureRandom.digest(value)
        if all, let session = try await storage.session(idHash: hash, now: Date()) {
            try await storage.deleteSessions(uid: session.uid)
        } else {
            try await storage.deleteSession(idHash: hash)
        }
    }
}
