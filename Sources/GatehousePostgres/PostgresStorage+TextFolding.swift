import GatehouseCore

extension PostgresStorage {
    /// The SQL that folds the text `expression` as `TextFolding.folded` does: NFC, ICU's root
    /// case mapping whatever the database's locale (a `C` database's `lower()` folds ASCII only),
    /// then `ς` as `σ`. `und-x-icu` is one of the collations PostgreSQL creates when it is built
    /// with ICU, as the distributions' packages and the official images are (Scaling).
    static func folded(_ expression: String) -> String {
        "translate(lower(normalize(\(expression), NFC) COLLATE \"und-x-icu\"), 'ς', 'σ')"
    }
}
