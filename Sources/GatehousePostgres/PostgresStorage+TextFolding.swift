import GatehouseCore

extension PostgresStorage {
    /// The SQL that folds the text `expression` as `TextFolding.folded` does: NFC, ICU's root
    /// case mapping whatever the database's locale (a `C` database's `lower()` folds ASCII only),
    /// then `ς` as `σ`. `und-x-icu` is one of the collations PostgreSQL creates when it is built
    /// with ICU, as the distributions' packages and the official images are (Scaling).
    static func folded(_ expression: String) -> String {
        "translate(lower(normalize(\(expression), NFC) COLLATE \"und-x-icu\"), 'ς', 'σ')"
    }

    /// The SQL for the text of `field` in the profile snapshot `column` (JSON in `bytea`).
    /// PostgreSQL's `jsonb` refuses the escape `\u0000`, which a provider's answer may carry
    /// into a snapshot: cast as it is, one such row would fail every statement scanning it. Each
    /// `\u0000` becomes `\ufffd` first (the replacement keeps the JSON valid: a `\\u0000` that
    /// spells the text "\u0000" becomes the text "\ufffd").
    static func snapshotField(_ column: String, _ field: String) -> String {
        "replace(convert_from(\(column), 'UTF8'), '\\u0000', '\\ufffd')::jsonb ->> '\(field)'"
    }
}
