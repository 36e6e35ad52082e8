import Foundation

/// Everything Gatehouse keeps, behind one protocol: SQLite embedded, PostgreSQL for
/// several instances. Each method is atomic; "take" methods delete what they return, so a
/// state, result or code-bound record can be used once even across instances.
public protocol GatehouseStorage: StoreMaintenance, FlowStore, AccountStore, SessionStore, KeyStore, ServiceKeyStore, LockStore, WebhookStore,
    AuditStore
{
    /// The live session `key` names with its account and links, in one read where the store
    /// can (one SQLite read transaction): the signed-in read path's miss.
    func signedIn(_ key: SessionKey, now: Date) async throws -> SignedInRecords?
}
