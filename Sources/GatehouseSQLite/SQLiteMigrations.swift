import Foundation
import GRDB
import GatehouseCore

/// The SQLite schema, as versioned forward-only migrations. Never edit a shipped migration:
/// add the next one.
enum SQLiteMigrations {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-foundation") { db in
            try db.execute(
                sql: """
                    CREATE TABLE accounts (
                      uid TEXT PRIMARY KEY,
                      created_at DATETIME NOT NULL,
                      last_sign_in_at DATETIME NOT NULL,
                      disabled BOOLEAN NOT NULL DEFAULT 0
                    );
                    CREATE TABLE provider_links (
                      uid TEXT NOT NULL REFERENCES accounts(uid) ON DELETE CASCADE,
                      provider_id TEXT NOT NULL,
                      federated_id TEXT NOT NULL,
                      profile_json BLOB NOT NULL,
                      sealed_tokens TEXT NOT NULL,
                      linked_at DATETIME NOT NULL,
                      updated_at DATETIME NOT NULL,
                      PRIMARY KEY (provider_id, federated_id),
                      UNIQUE (uid, provider_id)
                    );
                    CREATE INDEX provider_links_uid ON provider_links(uid);
                    CREATE TABLE signin_transactions (
                      state_hash TEXT PRIMARY KEY,
                      binding_hash TEXT NOT NULL,
                      provider_id TEXT NOT NULL,
                      code_verifier TEXT NOT NULL,
                      nonce TEXT NOT NULL,
                      return_to TEXT NOT NULL,
                      mode TEXT NOT NULL,
                      redirect_uri TEXT NOT NULL,
                      created_at DATETIME NOT NULL,
                      expires_at DATETIME NOT NULL
                    );
                    CREATE TABLE signin_results (
                      id_hash TEXT PRIMARY KEY,
                      payload BLOB NOT NULL,
                      expires_at DATETIME NOT NULL
                    );
                    CREATE TABLE sessions (
                      id_hash TEXT PRIMARY KEY,
                      uid TEXT NOT NULL REFERENCES accounts(uid) ON DELETE CASCADE,
                      created_at DATETIME NOT NULL,
                      expires_at DATETIME NOT NULL
                    );
                    CREATE INDEX sessions_uid ON sessions(uid);
                    """)
        }
        // The provider's own part of a started sign-in (Microsoft: the tenant whose endpoints it uses).
        migrator.registerMigration("v2-transaction-provider-context") { db in
            try db.execute(sql: "ALTER TABLE signin_transactions ADD COLUMN provider_context TEXT NOT NULL DEFAULT ''")
        }
        migrator.registerMigration("v3-service-keys") { db in
            try db.execute(
                sql: """
                    CREATE TABLE service_keys (
                      id TEXT PRIMARY KEY,
                      name TEXT NOT NULL,
                      secret_hash TEXT NOT NULL UNIQUE,
                      scopes TEXT NOT NULL,
                      created_at DATETIME NOT NULL,
                      revoked_at DATETIME
                    );
                    """)
        }
        // Accounts like Firebase's: verified emails for "one account per email", sessions that
        // double as refresh-token families, pending credentials, the gateway's signing keys,
        // and the account a link or re-authentication flow belongs to.
        migrator.registerMigration("v4-accounts-and-gateway-tokens") { db in
            try db.execute(
                sql: """
                    ALTER TABLE provider_links ADD COLUMN verified_email TEXT;
                    CREATE INDEX provider_links_verified_email ON provider_links(verified_email);
                    ALTER TABLE signin_transactions ADD COLUMN uid TEXT;
                    ALTER TABLE sessions ADD COLUMN family_id TEXT;
                    ALTER TABLE sessions ADD COLUMN sign_in_provider TEXT NOT NULL DEFAULT '';
                    UPDATE sessions SET family_id = id_hash;
                    CREATE UNIQUE INDEX sessions_family_id ON sessions(family_id);
                    CREATE TABLE refresh_tokens (
                      token_hash TEXT PRIMARY KEY,
                      family_id TEXT NOT NULL REFERENCES sessions(family_id) ON DELETE CASCADE,
                      created_at DATETIME NOT NULL,
                      used_at DATETIME
                    );
                    CREATE INDEX refresh_tokens_family_id ON refresh_tokens(family_id);
                    CREATE TABLE pending_credentials (
                      token_hash TEXT PRIMARY KEY,
                      target_uid TEXT NOT NULL REFERENCES accounts(uid) ON DELETE CASCADE,
                      provider_id TEXT NOT NULL,
                      federated_id TEXT NOT NULL,
                      profile_json BLOB NOT NULL,
                      sealed_tokens TEXT NOT NULL,
                      verified_email TEXT,
                      expires_at DATETIME NOT NULL
                    );
                    CREATE TABLE signing_keys (
                      kid TEXT PRIMARY KEY,
                      sealed_private_key TEXT NOT NULL,
                      created_at DATETIME NOT NULL
                    );
                    """)
            // Existing links get their verified email with the same normalization new ones use.
            // A snapshot that cannot be read stops the migration, naming its row.
            for row in try Row.fetchAll(db, sql: "SELECT uid, provider_id, federated_id, profile_json FROM provider_links") {
                let profile = try ProfileSnapshot.decode(
                    row["profile_json"], uid: row["uid"], providerId: row["provider_id"], federatedId: row["federated_id"])
                guard let email = EmailAddress.verified(of: profile) else { continue }
                try db.execute(
                    sql: "UPDATE provider_links SET verified_email = ? WHERE provider_id = ? AND federated_id = ?",
                    arguments: [email, row["provider_id"] as String, row["federated_id"] as String])
            }
        }
        // Envelope encryption: the vault's data keys, wrapped by configured keys.
        migrator.registerMigration("v5-data-keys") { db in
            try db.execute(
                sql: """
                    CREATE TABLE data_keys (
                      id TEXT PRIMARY KEY,
                      wrapped_key TEXT NOT NULL,
                      created_at DATETIME NOT NULL
                    );
                    """)
        }
        // Result binding (the client's result_challenge) and single-use ID tokens.
        migrator.registerMigration("v6-result-binding-and-spent-tokens") { db in
            try db.execute(
                sql: """
                    ALTER TABLE signin_transactions ADD COLUMN result_challenge TEXT;
                    CREATE TABLE spent_tokens (
                      token_hash TEXT PRIMARY KEY,
                      expires_at DATETIME NOT NULL
                    );
                    """)
        }
        // Retry windows: the sealed successor of a spent refresh token, the sealed answer of a
        // redeemed result, each until its window ends.
        migrator.registerMigration("v7-retry-windows") { db in
            try db.execute(
                sql: """
                    ALTER TABLE refresh_tokens ADD COLUMN sealed_successor TEXT;
                    ALTER TABLE refresh_tokens ADD COLUMN retry_until DATETIME;
                    ALTER TABLE signin_results ADD COLUMN sealed_answer TEXT;
                    ALTER TABLE signin_results ADD COLUMN answer_token_hash TEXT;
                    ALTER TABLE signin_results ADD COLUMN retry_until DATETIME;
                    CREATE INDEX refresh_tokens_retry_until ON refresh_tokens(retry_until) WHERE retry_until IS NOT NULL;
                    """)
        }
        // Custom claims per account (hooks, `PUT /v1/users/{uid}/claims`) and a sign-in's own
        // claims per session (a hook's `sessionClaims`).
        migrator.registerMigration("v8-custom-claims") { db in
            try db.execute(
                sql: """
                    ALTER TABLE accounts ADD COLUMN custom_claims BLOB;
                    ALTER TABLE sessions ADD COLUMN claims BLOB;
                    """)
        }
        // The webhook outbox: one row per event and endpoint, written in the transaction of
        // the change it reports, removed once delivered.
        migrator.registerMigration("v9-webhook-outbox") { db in
            try db.execute(
                sql: """
                    CREATE TABLE webhook_outbox (
                      id TEXT PRIMARY KEY,
                      event_id TEXT NOT NULL,
                      endpoint TEXT NOT NULL,
                      type TEXT NOT NULL,
                      payload BLOB NOT NULL,
                      created_at DATETIME NOT NULL,
                      next_attempt_at DATETIME NOT NULL,
                      attempts INTEGER NOT NULL DEFAULT 0,
                      status TEXT NOT NULL DEFAULT 'pending',
                      lease_until DATETIME,
                      last_status INTEGER,
                      last_error TEXT
                    );
                    CREATE INDEX webhook_outbox_due ON webhook_outbox(status, next_attempt_at);
                    CREATE INDEX webhook_outbox_created ON webhook_outbox(created_at);
                    """)
        }
        // The stored audit trail (the operators' activity listing), newest first by id.
        migrator.registerMigration("v10-audit-events") { db in
            try db.execute(
                sql: """
                    CREATE TABLE audit_events (
                      id INTEGER PRIMARY KEY AUTOINCREMENT,
                      at DATETIME NOT NULL,
                      event TEXT NOT NULL,
                      actor TEXT NOT NULL,
                      uid TEXT,
                      provider TEXT,
                      key_id TEXT
                    );
                    CREATE INDEX audit_events_uid ON audit_events(uid, id);
                    CREATE INDEX audit_events_event ON audit_events(event, id);
                    CREATE INDEX audit_events_at ON audit_events(at);
                    """)
        }
        // Each session's last use (sign-in or refresh), for the operators' session listing.
        migrator.registerMigration("v11-session-uses") { db in
            try db.execute(
                sql: """
                    CREATE TABLE session_uses (
                      family_id TEXT PRIMARY KEY,
                      used_at DATETIME NOT NULL,
                      client_address TEXT NOT NULL,
                      user_agent TEXT
                    );
                    """)
        }
        // Each service key's last use (written at most once a minute per key and instance).
        migrator.registerMigration("v12-service-key-uses") { db in
            try db.execute(sql: "CREATE TABLE service_key_uses (key_id TEXT PRIMARY KEY, used_at DATETIME NOT NULL)")
        }
        // Each endpoint's worker claims its own due entries: by (status, next_attempt_at) alone,
        // a healthy endpoint's claim read past every due entry of a receiver that is down, inside
        // the write transaction every other write waits for.
        migrator.registerMigration("v13-outbox-by-endpoint") { db in
            try db.execute(sql: "CREATE INDEX webhook_outbox_endpoint_due ON webhook_outbox(endpoint, status, next_attempt_at)")
        }
        // The session that started a link or re-authentication: the flow completes only while it lives.
        migrator.registerMigration("v14-flow-sessions") { db in
            try db.execute(sql: "ALTER TABLE signin_transactions ADD COLUMN session_family_id TEXT")
        }
        // When the session's user last authenticated at the provider (`NULL`: at its sign-in).
        migrator.registerMigration("v15-session-authentication-time") { db in
            try db.execute(sql: "ALTER TABLE sessions ADD COLUMN authenticated_at DATETIME")
        }
        // The purge finds what expired through these instead of reading every row.
        migrator.registerMigration("v16-expiry-indexes") { db in
            try db.execute(
                sql: """
                    CREATE INDEX signin_transactions_expires_at ON signin_transactions(expires_at);
                    CREATE INDEX signin_results_expires_at ON signin_results(expires_at);
                    CREATE INDEX signin_results_retry_until ON signin_results(retry_until) WHERE retry_until IS NOT NULL;
                    CREATE INDEX sessions_expires_at ON sessions(expires_at);
                    CREATE INDEX pending_credentials_expires_at ON pending_credentials(expires_at);
                    CREATE INDEX spent_tokens_expires_at ON spent_tokens(expires_at);
                    """)
        }
        // The claim holding an outbox entry (`OutboxLease.id`): its outcome is recorded only
        // while the entry is still held under that claim.
        migrator.registerMigration("v17-outbox-lease-ids") { db in
            try db.execute(sql: "ALTER TABLE webhook_outbox ADD COLUMN lease_id TEXT")
        }
        return migrator
    }
}
