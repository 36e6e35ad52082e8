import Foundation
import GatehouseCore
import Testing

/// The token vault's envelope layer against real stores: data keys made, shared between
/// instances, rotated, re-wrapped and retired.
@Suite struct EnvelopeVaultTests {
    let configured = TokenVault.generateKey()

    @Test(arguments: StorageBackend.all)
    func aFreshStoreGetsOneDataKeyThatEveryInstanceOpens(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let (first, second) = (try TokenVault(keys: [configured]), try TokenVault(keys: [configured]))
        try await first.load(from: storage)
        try await second.load(from: storage)
        let keys = try await storage.dataKeys()
        #expect(keys.count == 1)
        let id = try #require(keys.first?.id)
        #expect(first.sealingDataKeyID == id && second.sealingDataKeyID == id)
        let sealed = try first.seal(Data("gho_token".utf8), context: "c")
        #expect(sealed.hasPrefix("v2.\(id)."))
        #expect(try second.open(sealed, context: "c") == Data("gho_token".utf8))
        // The database alone opens nothing: another configured key cannot unwrap the data key.
        let stranger = try TokenVault(keys: [TokenVault.generateKey()])
        await #expect(throws: TokenVault.VaultError.noUsableDataKey) { try await stranger.load(from: storage) }
        #expect(throws: TokenVault.VaultError.self) { try stranger.open(sealed, context: "c") }
    }

    @Test(arguments: StorageBackend.all)
    func aStoreWithValuesUnderTheConfiguredKeyKeepsThemUntilTheFirstRotation(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let legacy = try TokenVault(keys: [configured]).seal(Data("t".utf8), context: "provider-tokens|github.com|1")
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1", tokens: legacy))
        let vault = try TokenVault(keys: [configured], reloadInterval: 0.1)
        try await vault.load(from: storage)
        #expect(try await storage.dataKeys().isEmpty)
        #expect(try vault.seal(Data("x".utf8), context: "c").hasPrefix("v1.\(vault.currentKeyID)."))

        let report = try await EncryptionRotation(storage: storage, vault: vault, retryWindow: 0).run()
        let id = try #require(report.newDataKeyID)
        #expect(report.resealed == 1 && report.remaining.isEmpty)
        let link = try #require(try await storage.link(providerId: "github.com", federatedId: "1"))
        #expect(link.sealedTokens.hasPrefix("v2.\(id)."))
        #expect(try vault.open(link.sealedTokens, context: "provider-tokens|github.com|1") == Data("t".utf8))
    }

    @Test(arguments: StorageBackend.all)
    func rotationRewrapsUnderTheNewConfiguredKeyAndRetiresTheOldDataKeyOncePendingCredentialsAreGone(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let before = try TokenVault(keys: [configured], reloadInterval: 0.1)
        try await before.load(from: storage)
        let oldID = try #require(before.sealingDataKeyID)
        try await storage.createAccount(
            Fixtures.account("u1"),
            firstLink: Fixtures.link("u1", federatedId: "1", tokens: try before.seal(Data("a".utf8), context: "provider-tokens|github.com|1")))
        try await storage.insertSigningKey(
            SigningKeyRecord(kid: "s1", sealedPrivateKey: try before.seal(Data("k".utf8), context: "signing-key|s1"), createdAt: Fixtures.now))
        var pending = Fixtures.pending("p1", target: "u1", expiresIn: 3600)
        pending.sealedTokens = try before.seal(Data("p".utf8), context: "provider-tokens|oidc.x|f-p1")
        pending.expiresAt = Date().addingTimeInterval(3600)
        try await storage.insertPendingCredential(pending)

        let newKey = TokenVault.generateKey()
        let during = try TokenVault(keys: [newKey, configured], reloadInterval: 0.1)
        let report = try await EncryptionRotation(storage: storage, vault: during, retryWindow: 0).run()
        #expect(report.rewrappedDataKeys == 1 && report.resealed == 1 && report.resealedSigningKeys == 1)
        // The pending credential still needs the old data key: not retired yet.
        #expect(report.retiredDataKeys.isEmpty)
        #expect(report.remaining == ["v2.\(oldID)": 1])
        #expect(try await storage.dataKeys().allSatisfy { $0.wrappedKey.hasPrefix("v1.\(TokenVault.keyID(for: newKey)).") })

        // The new configured key alone opens the pending credential (its data key was re-wrapped).
        let after = try TokenVault(keys: [newKey], reloadInterval: 0.1)
        try await after.load(from: storage)
        let taken = try #require(try await storage.takePendingCredential(tokenHash: "p1", now: Date()))
        #expect(try after.open(taken.sealedTokens, context: "provider-tokens|oidc.x|f-p1") == Data("p".utf8))
        let finish = try await EncryptionRotation(storage: storage, vault: after, retryWindow: 0).run(newDataKey: false)
        #expect(finish.retiredDataKeys == [oldID] && finish.remaining.isEmpty)
        let signing = try #require(try await storage.signingKeys().first)
        #expect(try after.open(signing.sealedPrivateKey, context: "signing-key|s1") == Data("k".utf8))
    }

    @Test(arguments: StorageBackend.all)
    func aValueUnderADataKeyThisInstanceHasNotLoadedMakesItReread(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        // This instance rereads only hourly; another one already seals with a newer key.
        let slow = try TokenVault(keys: [configured], reloadInterval: 3600)
        try await slow.load(from: storage)
        let clock = OffsetClock()
        let fast = try TokenVault(keys: [configured], reloadInterval: 0.05, clock: clock)
        try await storage.insertDataKey(try fast.newDataKey())
        clock.advance(by: 0.15)
        try await fast.load(from: storage)
        let sealed = try fast.seal(Data("new".utf8), context: "c")
        #expect(sealed.hasPrefix("v2.\(try #require(fast.sealingDataKeyID))."))
        #expect(fast.sealingDataKeyID != slow.sealingDataKeyID)
        #expect(throws: TokenVault.VaultError.self) { try slow.open(sealed, context: "c") }
        #expect(try await slow.open(sealed, context: "c", storage: storage) == Data("new".utf8))
    }
}
