import Foundation
import GRDB
import GatehouseCore

/// SQLiteStorage's `ServiceKeyStore` part.
extension SQLiteStorage {
    /// Saves a new service key (scopes as one space-separated column).
    public func insertServiceKey(_ key: ServiceKeyRecord) async throws {
        try await conflicting {
            try await write { db in
                try db.execute(
                    sql: "INSERT INTO service_keys (id, name, secret_hash, scopes, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)",
                    arguments: [key.id, key.name, key.secretHash, key.scopes.joined(separator: " "), key.createdAt, key.revokedAt])
            }
        }
    }
    /// The key with this secret hash.
    public func serviceKey(secretHash: String) async throws -> ServiceKeyRecord? {
        try await read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM service_keys WHERE secret_hash = ?"), arguments: [secretHash]).map(
                Self.serviceKey)
        }
    }
    /// Every key, oldest first.
    public func serviceKeys() async throws -> [ServiceKeyRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM service_keys ORDER BY created_at, id").map(Self.serviceKey)
        }
    }
    /// Revokes a key that is not revoked yet.
    public func revokeServiceKey(id: String, at date: Date) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE service_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", arguments: [date, id])
            return db.changesCount > 0
        }
    }

    /// Records a key's last use.
    public func recordServiceKeyUse(id: String, at date: Date) async throws {
        try await write { db in
            try db.cachedStatement(
                sql: "INSERT INTO service_key_uses (key_id, used_at) VALUES (?, ?) ON CONFLICT (key_id) DO UPDATE SET used_at = excluded.used_at"
            ).execute(arguments: [id, date])
        }
    }

    /// Keys' last uses.
    public func serviceKeyUses() async throws -> [String: Date] {
        try await read { db in
            var uses: [String: Date] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT key_id, used_at FROM service_key_uses") { uses[row["key_id"]] = row["used_at"] }
            return uses
        }
    }
}
