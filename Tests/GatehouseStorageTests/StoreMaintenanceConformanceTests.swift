import Foundation
@_spi(Testing) import GatehouseCore
import Testing

/// The `StoreMaintenance` part of the storage contract, run against every backend in
/// `StorageBackend.all`: the store itself: schema migrations, reachability, purging what expired.
@Suite struct StoreMaintenanceConformanceTests {
    @Test(arguments: StorageBackend.all)
    func migrationIsRepeatableAndPingAnswers(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.migrate()
        try await storage.ping()
    }

    @Test(arguments: StorageBackend.all)
    func purgeRemovesOnlyWhatExpired(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let live = Fixtures.transaction(state: "live")
        let stale = Fixtures.transaction(state: "stale", expiresIn: -1)
        try await storage.insertTransaction(live)
        try await storage.insertTransaction(stale)
        try await storage.insertResult(idHash: "live", payload: Data("x".utf8), expiresAt: Fixtures.now.addingTimeInterval(60))
        try await storage.insertSession(Fixtures.session("live", uid: "u1"))
        try await storage.insertSession(Fixtures.session("stale", uid: "u1", expiresIn: -1))

        try await storage.purgeExpired(now: Fixtures.now)

        #expect(try await storage.takeTransaction(stateHash: stale.stateHash, bindingHash: stale.bindingHash) == nil)
        #expect(try await storage.takeTransaction(stateHash: live.stateHash, bindingHash: live.bindingHash) == live)
        #expect(try await storage.takeResult(idHash: "live", now: Fixtures.now, redemption: .deleting(nil)))
        #expect(try await storage.session(idHash: SecureRandom.digest("live"), now: Fixtures.now) != nil)
        // Accounts and links are never purged.
        #expect(try await storage.account(uid: "u1") != nil)
    }
}
