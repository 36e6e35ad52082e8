import GatehouseCore
import PostgresNIO

/// PostgreSQL's SQLSTATE and primary message; never the detail field, which can quote the
/// offending row's values, nor the message of a data exception (SQLSTATE class 22), which can
/// quote the value that was refused (`invalid input syntax for type boolean: "…"`).
extension PSQLError: StoreFailureSummary {
    /// `SQLSTATE <code>: <message>`, or the client-side error code.
    public var storeFailureSummary: String {
        guard let serverInfo else { return "PostgreSQL client error: \(code)" }
        let state = serverInfo[.sqlState] ?? "?"
        if state.hasPrefix("22") { return "SQLSTATE \(state): a data exception (its message, which can quote a value, is not shown)" }
        return "SQLSTATE \(state): \(serverInfo[.message] ?? "no message")"
    }
}
