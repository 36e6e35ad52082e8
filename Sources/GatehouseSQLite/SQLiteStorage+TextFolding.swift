import GRDB
import GatehouseCore

extension SQLiteStorage {
    /// `TextFolding.folded` as the SQL function `gatehouse_fold(text)` (`NULL` for anything
    /// but text), added to every connection: SQLite's own `lower()` folds ASCII only.
    static let fold = DatabaseFunction("gatehouse_fold", argumentCount: 1, pure: true) { values in
        String.fromDatabaseValue(values[0]).map(TextFolding.folded)
    }
}
