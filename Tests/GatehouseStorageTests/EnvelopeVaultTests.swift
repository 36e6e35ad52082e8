import Foundation
@_spi(Testing) import GatehouseCore
import Testing

/// The token vault's envelope layer against real stores: data keys made, shared between
/// instances, rotated, re-wrapped and retired.
@Suite struct EnvelopeVaultTests {
    let configured = TokenVault.generateKey()

    @Test(arguments: StorageBackend.all)
    func aFreshStoreGetsOneDataKeyThatEveryInstanceOpens(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let (first, second) = (try TokenVault(keys: [configured], store: storage), try TokenVault(keys: [configured], store: storage))
        try await first.reload()
        try await second.reload()
        let keys = try await storage.dataKeys()
        #expect(keys.count == 1)
        let id = try #require(keys.first?.id)
        #expect(first.sealingDataKeyID == id && second.sealingDataKeyID == id)
        let sealed = try await first.seal(Data("gho_token".utf8), context: "c")
        #expect(sealed.hasPrefix("v2.\(id)."))
        #expect(try await second.open(sealed, context: "c") == Data("gho_token".utf8))
        // The database alone opens nothing: another configured key cannot unwrap the data key.
        let stranger = try TokenVault(keys: [TokenVault.generateKey()], store: storage)
        await #expect(throws: TokenVault.VaultError.noUsableDataKey) { try await stranger.reload() }
        await #expect(throws: TokenVault.VaultError.noUsableDataKey) { try await stranger.open(sealed, context: "c") }
    }

    @Test(arguments: StorageBackend.all)
    func aStoreWithValuesUnderTheConfiguredKeyKeepsThemUntilTheFirstRotation(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let legacy = try await TokenVault(keys: [configured]).seal(Data("t".utf8), context: "provider-tokens|github.com|1")
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1", tokens: legacy))
        let counting = CountingKeyStore(storage)
        let vault = try TokenVault(keys: [configured], store: counting, reloadInterval: 0.1)
        try await vault.reload()
        try await vault.reload()
        #expect(try await storage.dataKeys().isEmpty)
        // Each reread asks whether any sealed value is stored, not for the census of them all.
        #expect(counting.censuses == 0)
        #expect(try await vault.seal(Data("x".utf8), context: "c").hasPrefix("v1.\(vault.currentKeyID)."))

        let report = try await EncryptionRotation(storage: storage, vault: vault, retryWindow: 0).run()
        let id = try #require(report.newDataKeyID)
        #expect(report.resealed == 1 && report.remaining.isEmpty)
        let link = try #require(try await storage.link(providerId: "github.com", federatedId: "1"))
        #expect(link.sealedTokens.hasPrefix("v2.\(id)."))
        #expect(try await vault.open(link.sealedTokens, context: "provider-tokens|github.com|1") == Data("t".utf8))
    }

    @Test(arguments: StorageBackend.all)
    func rotationRewrapsUnderTheNewConfiguredKeyAndRetiresTheOldDataKeyOncePendingCredentialsAreGone(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let before = try TokenVault(keys: [configured], store: storage, reloadInterval: 0.1)
        try await before.reload()
        let oldID = try #require(before.sealingDataKeyID)
        try await storage.createAccount(
            Fixtures.account("u1"),
            firstLink: Fixtures.link("u1", federatedId: "1", tokens: try await before.seal(Data("a".utf8), context: "provider-tokens|github.com|1")))
        try await storage.insertSigningKey(
            SigningKeyRecord(kid: "s1", sealedPrivateKey: try await before.seal(Data("k".utf8), context: "signing-key|s1"), createdAt: Fixtures.now))
        var pending = Fixtures.pending("p1", target: "u1", expiresIn: 3600)
        pending.sealedTokens = try await before.seal(Data("p".utf8), context: "provider-tokens|oidc.x|f-p1")
        pending.expiresAt = Date().addingTimeInterval(3600)
        try await storage.insertPendingCredential(pending)

        let newKey = TokenVault.generateKey()
        let during = try TokenVault(keys: [newKey, configured], store: storage, reloadInterval: 0.1)
        let report = try await EncryptionRotation(storage: storage, vault: during, retryWindow: 0).run()
        #expect(report.rewrappedDataKeys == 1 && report.resealed == 1 && report.resealedSigningKeys == 1)
        // The pending credential still needs the old data key: not retired yet.
        #expect(report.retiredDataKeys.isEmpty)
        #expect(report.remaining == ["v2.\(oldID)": 1])
        let holds = try await storage.dataKeys().allSatisfy { $0.wrappedKey.hasPrefix("v1.\(TokenVault.keyID(for: newKey)).") }
        #expect(holds)

        // The new configured key alone opens the pending credential (its data key was re-wrapped).
        let after = try TokenVault(keys: [newKey], store: storage, reloadInterval: 0.1)
        try await after.reload()
        let taken = try #require(try await storage.takePendingCredential(tokenHash: "p1", now: Date()))
        #expect(try await after.open(taken.sealedTokens, context: "provider-tokens|oidc.x|f-p1") == Data("p".utf8))
        let finish = try await EncryptionRotation(storage: storage, vault: after, retryWindow: 0).run(newDataKey: false)
        #expect(finish.retiredDataKeys == [oldID] && finish.remaining.isEmpty)
        let signing = try #require(try await storage.signingKeys().first)
        #expect(try await after.open(signing.sealedPrivateKey, context: "signing-key|s1") == Data("k".utf8))
    }

    @Test(arguments: StorageBackend.all)
    func aValueUnderADataKeyThisInstanceHasNotLoadedMakesItReread(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        // This instance rereads only hourly; another one already seals with a newer key.
        let slow = try TokenVault(keys: [configured], store: storage, reloadInterval: 3600)
        try await slow.reload()
        let clock = OffsetClock()
        let fast = try TokenVault(keys: [configured], store: storage, reloadInterval: 0.05, clock: clock)
        try await storage.insertDataKey(try fast.newDataKey())
        clock.advance(by: 0.15)
        try await fast.reload()
        let sealed = try await fast.seal(Data("new".utf8), context: "c")
        #expect(sealed.hasPrefix("v2.\(try #require(fast.sealingDataKeyID))."))
        #expect(fast.sealingDataKeyID != slow.sealingDataKeyID)
        #expect(try await slow.open(sealed, context: "c") == Data("new".utf8))
    }

    @Test(arguments: StorageBackend.all)
    func theVaultLoadsItsRingOnItsOwnOnceForConcurrentCallersAndNeverHidesAStoreFailure(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let sealed = try await TokenVault(keys: [configured], store: storage).seal(Data("v".utf8), context: "c")
        #expect(sealed.hasPrefix("v2."))
        // A cold instance: twenty concurrent opens read the data keys once (callers arriving
        // during the read join it; later ones find the ring fresh).
        let counting = CountingKeyStore(storage)
        let cold = try TokenVault(keys: [configured], store: counting, reloadInterval: 3600)
        try await withThrowingTaskGroup(of: Data.self) { group in
            for _ in 0..<20 { group.addTask { try await cold.open(sealed, context: "c") } }
            for try await value in group { #expect(value == Data("v".utf8)) }
        }
        #expect(counting.reads == 1)
        // A store that fails while the ring loads: the failure itself, not "unreadable" (which
        // callers read as a lost key and answer with a re-authentication).
        counting.failing = true
        let failing = try TokenVault(keys: [configured], store: counting)
        await #expect(throws: CountingKeyStore.Failure.self) { try await failing.open(sealed, context: "c") }
        await #expect(throws: CountingKeyStore.Failure.self) { try await failing.seal(Data("x".utf8), context: "c") }
    }
}

/// A store's key parts, counting data-key reads and failing on request.
final class CountingKeyStore: DataKeyStore, @unchecked Sendable {
    struct Failure: Error {}
    private let base: any GatehouseStorage
    private let lock = NSLock()
    private var readCount = 0
    private var censusCount = 0
    private var fail = false

    init(_ base: any GatehouseStorage) { self.base = base }

    var reads: Int { lock.withLock { readCount } }
    /// How many times the census of sealed values (`sealingKeyUsage`) was read.
    var censuses: Int { lock.withLock { censusCount } }
    var failing: Bool {
        get { lock.withLock { fail } }
        set { lock.withLock { fail = newValue } }
    }

    func dataKeys() async throws -> [DataKeyRecord] {
        let failing = lock.withLock {
            readCount += 1
            return fail
        }
        if failing { throw Failure() }
        return try await base.dataKeys()
    }
    func insertSigningKey(_ key: SigningKeyRecord) async throws { try await base.insertSigningKey(key) }
    func signingKeys() async throws -> [SigningKeyRecord] { try await base.signingKeys() }
    func replaceSealedSigningKey(kid: String, expected: String, with sealed: String) async throws -> Bool {
        try await base.replaceSealedSigningKey(kid: kid, expected: expected, with: sealed)
    }
    func insertDataKey(_ key: DataKeyRecord) async throws { try await base.insertDataKey(key) }
    func replaceWrappedDataKey(id: String, expected: String, with wrapped: String) async throws -> Bool {
        try await base.replaceWrappedDataKey(id: id, expected: expected, with: wrapped)
    }
    func deleteDataKey(id: String) async throws -> Bool { try await base.deleteDataKey(id: id) }
    func sealingKeyUsage(now: Date) async throws -> [String: Int] {
        lock.withLock { censusCount += 1 }
        return try await base.sealingKeyUsage(now: now)
    }
    func holdsSealedValues(now: Date) async throws -> Bool { try await base.holdsSealedValues(now: now) }
    func withLock<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T {
        try await base.withLock(name, body)
    }
}
