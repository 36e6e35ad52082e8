import Foundation
import GatehouseCore
import Logging
import PostgresNIO
import _ConnectionPoolModule

/// PostgresStorage's `ServiceKeyStore` part.
extension PostgresStorage {
    /// Saves a new service key (scopes as one space-separated column).
    public func insertServiceKey(_ key: ServiceKeyRecord) async throws {
        try await execute(
            """
            INSERT INTO service_keys (id, name, secret_hash, scopes, created_at, revoked_at)
            VALUES (\(key.id), \(key.name), \(key.secretHash), \(key.scopes.joined(separator: " ")), \(key.createdAt), \(key.revokedAt))
            """)
    }
    /// The key with this secret hash.
    public func serviceKey(secretHash: String) async throws -> ServiceKeyRecord? {
        try await serviceKeys("SELECT \(unescaped: Self.keyColumns) FROM service_keys WHERE secret_hash = \(secretHash)").first
    }
    /// Every key, oldest first.
    public func serviceKeys() async throws -> [ServiceKeyRecord] {
        try await serviceKeys("SELECT \(unescaped: Self.keyColumns) FROM service_keys ORDER BY created_at, id")
    }
    /// Revokes a key that is not revoked yet.
    public func revokeServiceKey(id: String, at date: Date) async throws -> Bool {
        try await changed("UPDATE service_keys SET revoked_at = \(date) WHERE id = \(id) AND revoked_at IS NULL RETURNING id")
    }

    /// Records a key's last use.
    public func recordServiceKeyUse(id: String, at date: Date) async throws {
        try await execute(
            """
            INSERT INTO service_key_uses (key_id, used_at) VALUES (\(id), \(date))
            ON CONFLICT (key_id) DO UPDATE SET used_at = excluded.used_at
            """)
    }

    /// Keys' last uses.
    public func serviceKeyUses() async throws -> [String: Date] {
        var uses: [String: Date] = [:]
        for (id, at) in try await query("SELECT key_id, used_at FROM service_key_uses", logger: logger).decode((String, Date).self) {
            uses[id] = at
        }
        return uses
    }
}
