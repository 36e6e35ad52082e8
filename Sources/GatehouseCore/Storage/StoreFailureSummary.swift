/// A store's own error that can describe itself for the log: its code and the database's
/// message, never a statement's values. The HTTP layer logs it with an unexpected `500`, so
/// an operator sees *which* store failure it was (issue #21), not just a type name.
public protocol StoreFailureSummary: Error {
    /// For example `SQLITE_ERROR (1): no such table: provider_links` or `SQLSTATE 42P01: …`.
    var storeFailureSummary: String { get }
}
