import Foundation
import GatehouseCore
import Testing

/// The `ServiceKeyStore` part of the storage contract: keys found by hash, listed, revoked once.
@Suite struct ServiceKeyStoreConformanceTests {
    @Test(arguments: StorageBackend.all)
    func serviceKeysAreFoundByHashListedAndRevokedOnce(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let key = ServiceKeyRecord(
            id: "sk_1", name: "billing", secretHash: SecureRandom.digest("secret-1"), scopes: ["photo:read", "profile:read"],
            createdAt: Fixtures.now)
        try await storage.insertServiceKey(key)
        try await storage.insertServiceKey(
            ServiceKeyRecord(
                id: "sk_2", name: "admin", secretHash: SecureRandom.digest("secret-2"), scopes: ["admin"],
                createdAt: Fixtures.now.addingTimeInterval(1)))
        #expect(try await storage.serviceKey(secretHash: SecureRandom.digest("secret-1")) == key)
        #expect(try await storage.serviceKey(secretHash: SecureRandom.digest("unknown")) == nil)
        #expect(try await storage.serviceKeys().map(\.id) == ["sk_1", "sk_2"])
        #expect(try await storage.revokeServiceKey(id: "sk_1", at: Fixtures.now))
        #expect(try await storage.revokeServiceKey(id: "sk_1", at: Fixtures.now) == false)
        #expect(try await storage.revokeServiceKey(id: "nope", at: Fixtures.now) == false)
        #expect(try await storage.serviceKey(secretHash: SecureRandom.digest("secret-1"))?.revokedAt == Fixtures.now)
        await #expect(throws: StorageError.conflict) {
            try await storage.insertServiceKey(
                ServiceKeyRecord(id: "sk_3", name: "dup", secretHash: SecureRandom.digest("secret-2"), scopes: ["admin"], createdAt: Fixtures.now))
        }
    }

    @Test(arguments: StorageBackend.all)
    func aKeysLastUseIsReplaced(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        #expect(try await storage.serviceKeyUses().isEmpty)
        try await storage.recordServiceKeyUse(id: "k1", at: Fixtures.now)
        try await storage.recordServiceKeyUse(id: "k2", at: Fixtures.now)
        try await storage.recordServiceKeyUse(id: "k1", at: Fixtures.now.addingTimeInterval(60))
        #expect(try await storage.serviceKeyUses() == ["k1": Fixtures.now.addingTimeInterval(60), "k2": Fixtures.now])
    }
}
