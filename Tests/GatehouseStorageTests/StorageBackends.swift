import Foundation
import GatehouseCore
import GatehouseSQLite
import Testing

/// A store under test: a name for the test report and a factory that gives a fresh, migrated,
/// empty store each time. Every implementation of `GatehouseStorage` is listed here, so one
/// conformance suite holds all of them to the same contract.
struct StorageBackend: CustomTestStringConvertible, Sendable {
    /// Shown in the test report.
    let name: String
    /// A fresh, migrated store.
    let make: @Sendable () async throws -> any GatehouseStorage

    var testDescription: String { name }

    /// Every backend available in this run.
    static let all: [StorageBackend] = [sqlite]

    /// SQLite in a new temporary file per store.
    static let sqlite = StorageBackend(name: "SQLite") {
        let storage = try SQLiteStorage(path: temporaryDatabasePath())
        try await storage.migrate()
        return storage
    }

    /// A new path under a fresh temporary folder.
    static func temporaryDatabasePath() throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-storage-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder.appendingPathComponent("gatehouse.sqlite").path
    }
}
