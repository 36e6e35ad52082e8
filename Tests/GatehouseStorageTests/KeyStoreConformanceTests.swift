import Foundation
@_spi(Testing) import GatehouseCore
import Testing

/// The `KeyStore` part of the storage contract, run against every backend in
/// `StorageBackend.all`: signing keys and data keys: listing, compare-and-set re-encryption, what each key seals.
@Suite struct KeyStoreConformanceTests {
    @Test(arguments: StorageBackend.all)
    func signingKeysComeBackNewestFirst(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let old = SigningKeyRecord(kid: "a", sealedPrivateKey: "v1.k.old", createdAt: Fixtures.now)
        let new = SigningKeyRecord(kid: "b", sealedPrivateKey: "v1.k.new", createdAt: Fixtures.now.addingTimeInterval(10))
        try await storage.insertSigningKey(old)
        try await storage.insertSigningKey(new)
        #expect(try await storage.signingKeys() == [new, old])
        await #expect(throws: StorageError.conflict) { try await storage.insertSigningKey(old) }
    }

    @Test(arguments: StorageBackend.all)
    func dataKeysAreListedNewestFirstRewrappedAndDeleted(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let old = DataKeyRecord(id: "d1", wrappedKey: "v1.k1.old", createdAt: Fixtures.now)
        let new = DataKeyRecord(id: "d2", wrappedKey: "v1.k1.new", createdAt: Fixtures.now.addingTimeInterval(10))
        try await storage.insertDataKey(old)
        try await storage.insertDataKey(new)
        #expect(try await storage.dataKeys() == [new, old])
        await #expect(throws: StorageError.conflict) { try await storage.insertDataKey(old) }

        #expect(try await storage.replaceWrappedDataKey(id: "d1", expected: "v1.k1.old", with: "v1.k2.old") == true)
        // Compare-and-set: a stale expectation changes nothing.
        #expect(try await storage.replaceWrappedDataKey(id: "d1", expected: "v1.k1.old", with: "v1.k3.old") == false)
        #expect(try await storage.dataKeys().last?.wrappedKey == "v1.k2.old")

        #expect(try await storage.deleteDataKey(id: "d1") == true)
        #expect(try await storage.deleteDataKey(id: "d1") == false)
        #expect(try await storage.dataKeys() == [new])
    }

    @Test(arguments: StorageBackend.all)
    func sealedSigningKeysAreReplacedWithCompareAndSet(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.insertSigningKey(SigningKeyRecord(kid: "s", sealedPrivateKey: "v1.k.a", createdAt: Fixtures.now))
        #expect(try await storage.replaceSealedSigningKey(kid: "s", expected: "v1.k.a", with: "v2.d.b") == true)
        #expect(try await storage.replaceSealedSigningKey(kid: "s", expected: "v1.k.a", with: "v2.d.c") == false)
        #expect(try await storage.signingKeys().map(\.sealedPrivateKey) == ["v2.d.b"])
    }

    @Test(arguments: StorageBackend.all)
    func sealingKeyUsageCountsLinksSigningKeysLivePendingCredentialsAndRetryWindows(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        #expect(try await storage.sealingKeyUsage(now: Fixtures.now) == [:])
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1", tokens: "v2.d1.aaa"))
        try await storage.addLink(Fixtures.link("u1", provider: "oidc.x", federatedId: "2", tokens: "v1.k9.bbb"))
        try await storage.insertSigningKey(SigningKeyRecord(kid: "s", sealedPrivateKey: "v2.d1.ccc", createdAt: Fixtures.now))
        var live = Fixtures.pending("p1", target: "u1")
        live.sealedTokens = "v2.d2.ddd"
        var expired = Fixtures.pending("p2", target: "u1", expiresIn: -1)
        expired.sealedTokens = "v2.d3.eee"
        try await storage.insertPendingCredential(live)
        try await storage.insertPendingCredential(expired)
        #expect(try await storage.sealingKeyUsage(now: Fixtures.now) == ["v2.d1": 2, "v1.k9": 1, "v2.d2": 1])
        // What retry windows keep counts while the window lasts.
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        try await storage.insertRefreshToken(tokenHash: "r1", familyId: session.familyId, at: Fixtures.now)
        let successor = RefreshSuccessor(
            tokenHash: "r2", sealedToken: "v2.d4.fff", retryUntil: Fixtures.now.addingTimeInterval(10), familyLimit: .max)
        _ = try await storage.rotateRefreshToken(tokenHash: "r1", successor: successor, now: Fixtures.now)
        try await storage.insertResult(idHash: "res", payload: Data("x".utf8), expiresAt: Fixtures.now.addingTimeInterval(60))
        let redemption = ResultRedemption(refreshToken: nil, sealedAnswer: "v2.d4.ggg", retryUntil: Fixtures.now.addingTimeInterval(10))
        #expect(try await storage.takeResult(idHash: "res", now: Fixtures.now, redemption: redemption))
        #expect(try await storage.sealingKeyUsage(now: Fixtures.now) == ["v2.d1": 2, "v1.k9": 1, "v2.d2": 1, "v2.d4": 2])
        #expect(try await storage.sealingKeyUsage(now: Fixtures.now.addingTimeInterval(10)) == ["v2.d1": 2, "v1.k9": 1, "v2.d2": 1])
    }

    @Test(arguments: StorageBackend.all)
    func holdsSealedValuesAnswersWhetherTheCensusCountsAny(_ backend: StorageBackend) async throws {
        // The kinds that exist without an account (a pending credential or a refresh token
        // belongs to an account, which has a link): each alone.
        let empty = try await backend.make()
        #expect(try await !empty.holdsSealedValues(now: Fixtures.now))
        let linked = try await backend.make()
        try await linked.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1", tokens: "v1.k.a"))
        #expect(try await linked.holdsSealedValues(now: Fixtures.now))
        let signing = try await backend.make()
        try await signing.insertSigningKey(SigningKeyRecord(kid: "s", sealedPrivateKey: "v1.k.b", createdAt: Fixtures.now))
        #expect(try await signing.holdsSealedValues(now: Fixtures.now))
        // A result's answer kept for its retry window counts while the window lasts.
        let results = try await backend.make()
        try await results.insertResult(idHash: "res", payload: Data("x".utf8), expiresAt: Fixtures.now.addingTimeInterval(60))
        #expect(try await !results.holdsSealedValues(now: Fixtures.now))
        let redemption = ResultRedemption(refreshToken: nil, sealedAnswer: "v2.d.f", retryUntil: Fixtures.now.addingTimeInterval(10))
        #expect(try await results.takeResult(idHash: "res", now: Fixtures.now, redemption: redemption))
        #expect(try await results.holdsSealedValues(now: Fixtures.now))
        #expect(try await !results.holdsSealedValues(now: Fixtures.now.addingTimeInterval(10)))
        for storage in [empty, linked, signing, results] {
            for now in [Fixtures.now, Fixtures.now.addingTimeInterval(10)] {
                #expect(try await storage.holdsSealedValues(now: now) == !storage.sealingKeyUsage(now: now).isEmpty)
            }
        }
    }
}
