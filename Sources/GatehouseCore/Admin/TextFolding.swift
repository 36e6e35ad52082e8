import Foundation

/// How lookups compare text without case (the unverified email lookup, operators' account
/// search, email matching): canonically composed (NFC), so an `e` followed by U+0301 equals
/// `é`, then lower-cased with Unicode's case mapping, so `É` equals `é` as `E` equals `e`.
///
/// Both stores compare stored text folded the same way, never by their own `lower()`
/// (ASCII-only in SQLite, the database's locale in PostgreSQL): SQLite through the SQL
/// function `gatehouse_fold`, which calls `folded(_:)`, and PostgreSQL with
/// `lower(normalize(text, NFC) COLLATE "und-x-icu")`, ICU's root case mapping.
public enum TextFolding {
    /// `text` in NFC, lower-cased.
    public static func folded(_ text: String) -> String {
        text.precomposedStringWithCanonicalMapping.lowercased()
    }
}
