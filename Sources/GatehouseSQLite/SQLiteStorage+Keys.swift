import Foundation
import GRDB
import GatehouseCore

/// SQLiteStorage's `KeyStore` part.
extension SQLiteStorage {
    /// Saves a signing key.
    public func insertSigningKey(_ key: SigningKeyRecord) async throws {
        try await conflicting {
            try await write { db in
                try db.execute(
                    sql: "INSERT INTO signing_keys (kid, sealed_private_key, created_at) VALUES (?, ?, ?)",
                    arguments: [key.kid, key.sealedPrivateKey, key.createdAt])
            }
        }
    }
    /// Every signing key, newest first.
    public func signingKeys() async throws -> [SigningKeyRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM signing_keys ORDER BY created_at DESC, kid").map { row in
                SigningKeyRecord(kid: row["kid"], sealedPrivateKey: row["sealed_private_key"], createdAt: row["created_at"])
            }
        }
    }
    /// Replaces a signing key's sealed private key if it is still `expected`.
    public func replaceSealedSigningKey(kid: String, expected: String, with sealed: String) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE signing_keys SET sealed_private_key = ? WHERE kid = ? AND sealed_private_key = ?", arguments: [sealed, kid, expected])
            return db.changesCount > 0
        }
    }
    /// Saves a data key.
    public func insertDataKey(_ key: DataKeyRecord) async throws {
        try await conflicting {
            try await write { db in
                try db.execute(
                    sql: "INSERT INTO data_keys (id, wrapped_key, created_at) VALUES (?, ?, ?)", arguments: [key.id, key.wrappedKey, key.createdAt])
            }
        }
    }
    /// Every data key, newest first.
    public func dataKeys() async throws -> [DataKeyRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM data_keys ORDER BY created_at DESC, id").map { row in
                DataKeyRecord(id: row["id"], wrappedKey: row["wrapped_key"], createdAt: row["created_at"])
            }
        }
    }
    /// Replaces a data key's wrapping if it is still `expected`.
    public func replaceWrappedDataKey(id: String, expected: String, with wrapped: String) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE data_keys SET wrapped_key = ? WHERE id = ? AND wrapped_key = ?", arguments: [wrapped, id, expected])
            return db.changesCount > 0
        }
    }
    /// Deletes a data key.
    public func deleteDataKey(id: String) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM data_keys WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }
    /// Sealed values per key label (`v2.<id>`), over links, signing keys and live pending credentials.
    public func sealingKeyUsage(now: Date) async throws -> [String: Int] {
        // The label ends before the second dot: `substr(value, 4)` starts after `vN.`.
        func label(_ column: String) -> String { "substr(\(column), 1, instr(substr(\(column), 4), '.') + 2)" }
        let sql = """
            SELECT label, count(*) AS uses FROM (
              SELECT \(label("sealed_tokens")) AS label FROM provider_links
              UNION ALL SELECT \(label("sealed_private_key")) FROM signing_keys
              UNION ALL SELECT \(label("sealed_tokens")) FROM pending_credentials WHERE expires_at > ?1
              UNION ALL SELECT \(label("sealed_successor")) FROM refresh_tokens WHERE sealed_successor IS NOT NULL AND retry_until > ?1
              UNION ALL SELECT \(label("sealed_answer")) FROM signin_results WHERE sealed_answer IS NOT NULL AND retry_until > ?1
            ) GROUP BY label
            """
        return try await read { db in
            var usage: [String: Int] = [:]
            for row in try Row.fetchAll(db, sql: sql, arguments: [now]) {
                usage[row["label"]] = row["uses"]
            }
            return usage
        }
    }
    /// Whether any value `sealingKeyUsage` counts is stored (one row of each kind at most).
    public func holdsSealedValues(now: Date) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(
                db,
                sql: """
                    SELECT EXISTS (SELECT 1 FROM provider_links) OR EXISTS (SELECT 1 FROM signing_keys)
                      OR EXISTS (SELECT 1 FROM pending_credentials WHERE expires_at > ?1)
                      OR EXISTS (SELECT 1 FROM refresh_tokens WHERE sealed_successor IS NOT NULL AND retry_until > ?1)
                      OR EXISTS (SELECT 1 FROM signin_results WHERE sealed_answer IS NOT NULL AND retry_until > ?1)
                    """, arguments: [now]) ?? false
        }
    }
}
