import GatehouseCore
import PostgresNIO

/// PostgreSQL's SQLSTATE and primary message; never the detail field, which can quote the
/// offending row's values.
extension PSQLError: StoreFailureSummary {
    /// `SQLSTATE <code>: <message>`, or the client-side error code.
    public var storeFailureSummary: String {
        guard let serverInfo else { return "PostgreSQL client error: \(code)" }
        return "SQLSTATE \(serverInfo[.sqlState] ?? "?"): \(serverInfo[.message] ?? "no message")"
    }
}
