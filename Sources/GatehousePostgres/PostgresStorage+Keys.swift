import Foundation
import GatehouseCore
import Logging
import PostgresNIO
import _ConnectionPoolModule

/// PostgresStorage's `KeyStore` part.
extension PostgresStorage {
    /// Saves a signing key.
    public func insertSigningKey(_ key: SigningKeyRecord) async throws {
        try await execute(
            "INSERT INTO signing_keys (kid, sealed_private_key, created_at) VALUES (\(key.kid), \(key.sealedPrivateKey), \(key.createdAt))")
    }
    /// Every signing key, newest first.
    public func signingKeys() async throws -> [SigningKeyRecord] {
        var keys: [SigningKeyRecord] = []
        for (kid, sealed, created) in try await query(
            "SELECT kid, sealed_private_key, created_at FROM signing_keys ORDER BY created_at DESC, kid", logger: logger
        ).decode((String, String, Date).self) {
            keys.append(SigningKeyRecord(kid: kid, sealedPrivateKey: sealed, createdAt: created))
        }
        return keys
    }
    /// Replaces a signing key's sealed private key if it is still `expected`.
    public func replaceSealedSigningKey(kid: String, expected: String, with sealed: String) async throws -> Bool {
        try await changed(
            "UPDATE signing_keys SET sealed_private_key = \(sealed) WHERE kid = \(kid) AND sealed_private_key = \(expected) RETURNING kid")
    }
    /// Saves a data key.
    public func insertDataKey(_ key: DataKeyRecord) async throws {
        try await execute("INSERT INTO data_keys (id, wrapped_key, created_at) VALUES (\(key.id), \(key.wrappedKey), \(key.createdAt))")
    }
    /// Every data key, newest first.
    public func dataKeys() async throws -> [DataKeyRecord] {
        var keys: [DataKeyRecord] = []
        for (id, wrapped, created) in try await query(
            "SELECT id, wrapped_key, created_at FROM data_keys ORDER BY created_at DESC, id", logger: logger
        ).decode((String, String, Date).self) {
            keys.append(DataKeyRecord(id: id, wrappedKey: wrapped, createdAt: created))
        }
        return keys
    }
    /// Replaces a data key's wrapping if it is still `expected`.
    public func replaceWrappedDataKey(id: String, expected: String, with wrapped: String) async throws -> Bool {
        try await changed("UPDATE data_keys SET wrapped_key = \(wrapped) WHERE id = \(id) AND wrapped_key = \(expected) RETURNING id")
    }
    /// Deletes a data key.
    public func deleteDataKey(id: String) async throws -> Bool {
        try await changed("DELETE FROM data_keys WHERE id = \(id) RETURNING id")
    }
    /// Sealed values per key label (`v2.<id>`), over links, signing keys and live pending credentials.
    public func sealingKeyUsage(now: Date) async throws -> [String: Int] {
        var usage: [String: Int] = [:]
        for (label, uses) in try await scan(
            """
            SELECT split_part(value, '.', 1) || '.' || split_part(value, '.', 2), count(*) FROM (
              SELECT sealed_tokens AS value FROM provider_links
              UNION ALL SELECT sealed_private_key FROM signing_keys
              UNION ALL SELECT sealed_tokens FROM pending_credentials WHERE expires_at > \(now)
              UNION ALL SELECT sealed_successor FROM refresh_tokens WHERE sealed_successor IS NOT NULL AND retry_until > \(now)
              UNION ALL SELECT sealed_answer FROM signin_results WHERE sealed_answer IS NOT NULL AND retry_until > \(now)
            ) sealed GROUP BY 1
            """, limited: false
        ).decode((String, Int).self) {
            usage[label] = uses
        }
        return usage
    }
    /// Whether any value `sealingKeyUsage` counts is stored (one row of each kind at most).
    public func holdsSealedValues(now: Date) async throws -> Bool {
        try await query(
            """
            SELECT EXISTS (SELECT 1 FROM provider_links) OR EXISTS (SELECT 1 FROM signing_keys)
              OR EXISTS (SELECT 1 FROM pending_credentials WHERE expires_at > \(now))
              OR EXISTS (SELECT 1 FROM refresh_tokens WHERE sealed_successor IS NOT NULL AND retry_until > \(now))
              OR EXISTS (SELECT 1 FROM signin_results WHERE sealed_answer IS NOT NULL AND retry_until > \(now))
            """, logger: logger
        ).decode(Bool.self).first ?? false
    }
}
