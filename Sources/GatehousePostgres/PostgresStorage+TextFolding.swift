import GatehouseCore

extension PostgresStorage {
    /// The SQL that folds the text `expression` as `TextFolding.folded` does: NFC, then ICU's
    /// root case mapping, whatever the database's locale (a `C` database's `lower()` folds
    /// ASCII only). `und-x-icu` is one of the collations PostgreSQL creates when built with
    /// ICU, as the distributions' packages and images are.
    static func folded(_ expression: String) -> String {
        "lower(normalize(\(expression), NFC) COLLATE \"und-x-icu\")"
    }
}
