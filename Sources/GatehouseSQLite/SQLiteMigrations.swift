import GRDB

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
        return migrator
    }
}
