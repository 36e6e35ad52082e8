import GRDB
import GatehouseCore

/// SQLite's result code and message. GRDB's `description` can carry the statement, and with
/// public arguments its values, so only these two parts are used.
extension DatabaseError: StoreFailureSummary {
    /// `SQLite error <code> (extended <code>): <message>`.
    public var storeFailureSummary: String {
        "SQLite error \(resultCode.rawValue) (extended \(extendedResultCode.rawValue)): \(message ?? "no message")"
    }
}
