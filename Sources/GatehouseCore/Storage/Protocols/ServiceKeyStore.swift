import Foundation

/// The keys internal services call `/v1/users…` with. Part of `GatehouseStorage`.
public protocol ServiceKeyStore: Sendable {
    /// Saves a new service key.
    func insertServiceKey(_ key: ServiceKeyRecord) async throws
    /// The key whose secret has this hash (revoked ones included; the caller checks).
    func serviceKey(secretHash: String) async throws -> ServiceKeyRecord?
    /// Every key, oldest first.
    func serviceKeys() async throws -> [ServiceKeyRecord]
    /// Revokes a key; `false` when there is no such key or it was already revoked.
    func revokeServiceKey(id: String, at date: Date) async throws -> Bool
    /// Records that a key was used at `date` (the last use replaces the one before).
    func recordServiceKeyUse(id: String, at date: Date) async throws
    /// Each key's last recorded use (keys never used are missing).
    func serviceKeyUses() async throws -> [String: Date]
}
