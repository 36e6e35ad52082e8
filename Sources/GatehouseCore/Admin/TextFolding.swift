import Foundation

/// How lookups compare text without case (the unverified email lookup, operators' account
/// search): canonically composed (NFC), so an `e` followed by U+0301 equals `é`, then
/// lower-cased with Unicode's case mapping, so `É` equals `é` as `E` equals `e`, with the final
/// sigma `ς` read as `σ`.
///
/// Both stores compare stored text folded the same way, never by their own `lower()`
/// (ASCII-only in SQLite, the database's locale in PostgreSQL): SQLite through the SQL
/// function `gatehouse_fold`, which calls `folded(_:)`, and PostgreSQL with ICU's root case
/// mapping (`PostgresStorage.folded`). The two mappings differ in one letter only: ICU writes
/// a capital sigma at a word's end as `ς`, Swift as `σ`; reading `ς` as `σ` on both sides (as
/// Unicode's case folding does) makes them agree.
public enum TextFolding {
    /// `text` in NFC, lower-cased, `ς` as `σ`.
    public static func folded(_ text: String) -> String {
        let lowered = text.precomposedStringWithCanonicalMapping.lowercased()
        return lowered.contains("ς") ? lowered.replacingOccurrences(of: "ς", with: "σ") : lowered
    }
}
