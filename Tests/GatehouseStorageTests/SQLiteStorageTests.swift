import Foundation
import GatehouseCore
import GatehouseSQLite
import Testing

/// What only the SQLite file store promises: its data survives closing and reopening the file.
@Suite struct SQLiteStorageTests {
    @Test func dataSurvivesReopeningTheFile() async throws {
        let path = try StorageBackend.temporaryDatabasePath()
        do {
            let storage = try SQLiteStorage(path: path)
            try await storage.migrate()
            try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
            try await storage.insertSession(Fixtures.session("s", uid: "u1"))
        }
        let reopened = try SQLiteStorage(path: path)
        try await reopened.migrate()
        #expect(try await reopened.account(uid: "u1") == Fixtures.account("u1"))
        #expect(try await reopened.session(idHash: SecureRandom.digest("s"), now: Fixtures.now)?.uid == "u1")
    }

    @Test func aFileThatIsNotADatabaseIsRefused() async throws {
        let path = try StorageBackend.temporaryDatabasePath()
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: path))
        await #expect(throws: (any Error).self) {
            let storage = try SQLiteStorage(path: path)
            try await storage.migrate()
        }
    }
}
