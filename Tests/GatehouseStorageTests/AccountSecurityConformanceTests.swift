import Foundation
import GatehouseCore
import Testing

/// The storage contract of linking, unlinking, deletion, refresh-token families, pending
/// credentials and signing keys, on every backend.
@Suite struct AccountSecurityConformanceTests {
    @Test(arguments: StorageBackend.all)
    func addLinkRefusesATakenIdentityOrProviderSlot(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", provider: "microsoft.com", federatedId: "m2"))
        // The identity is on u1 already.
        await #expect(throws: StorageError.conflict) { try await storage.addLink(Fixtures.link("u2", federatedId: "1")) }
        // u1 already has a GitHub identity.
        await #expect(throws: StorageError.conflict) { try await storage.addLink(Fixtures.link("u1", federatedId: "other")) }
        var linked = Fixtures.link("u1", provider: "microsoft.com", federatedId: "m1")
        linked.verifiedEmail = "pat@example.com"
        try await storage.addLink(linked)
        #expect(try await storage.links(uid: "u1").map(\.providerId) == ["github.com", "microsoft.com"])
        #expect(try await storage.uids(verifiedEmail: "pat@example.com", limit: 5) == ["u1"])
        #expect(try await storage.uids(verifiedEmail: "PAT@example.com", limit: 5) == [])
    }

    @Test(arguments: StorageBackend.all)
    func concurrentLinksOfOneIdentityHaveOneWinner(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        for index in 0..<8 {
            try await storage.createAccount(Fixtures.account("u\(index)"), firstLink: Fixtures.link("u\(index)", federatedId: "g\(index)"))
        }
        let winners = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<8 {
                group.addTask {
                    do {
                        try await storage.addLink(Fixtures.link("u\(index)", provider: "oidc.x", federatedId: "shared"))
                        return 1
                    } catch StorageError.conflict {
                        return 0
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(winners == 1)
    }

    @Test(arguments: StorageBackend.all)
    func theLastLinkCannotBeRemovedEvenByConcurrentUnlinks(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.addLink(Fixtures.link("u1", provider: "microsoft.com", federatedId: "m1"))
        #expect(try await storage.deleteLink(uid: "u1", providerId: "yahoo.com") == .notLinked)
        async let first = storage.deleteLink(uid: "u1", providerId: "github.com")
        async let second = storage.deleteLink(uid: "u1", providerId: "microsoft.com")
        let outcomes = try await [first, second]
        #expect(outcomes.filter { if case .deleted = $0 { true } else { false } }.count == 1)
        #expect(outcomes.contains(.lastLink))
        #expect(try await storage.links(uid: "u1").count == 1)
    }

    @Test(arguments: StorageBackend.all)
    func deletingAnAccountTakesItsLinksSessionsTokensAndPendingCredentials(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let link = Fixtures.link("u1", federatedId: "1")
        try await storage.createAccount(Fixtures.account("u1"), firstLink: link)
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        try await storage.insertRefreshToken(tokenHash: "r1", familyId: session.familyId, at: Fixtures.now)
        try await storage.insertPendingCredential(Self.pending("p1", target: "u1"))
        #expect(try await storage.deleteAccount(uid: "u1") == [link])
        #expect(try await storage.deleteAccount(uid: "u1") == nil)
        #expect(try await storage.account(uid: "u1") == nil)
        #expect(try await storage.link(providerId: "github.com", federatedId: "1") == nil)
        #expect(try await storage.session(familyId: session.familyId, now: Fixtures.now) == nil)
        #expect(try await storage.rotateRefreshToken(tokenHash: "r1", successorHash: "r2", now: Fixtures.now) == .unknown)
        #expect(try await storage.takePendingCredential(tokenHash: "p1", now: Fixtures.now) == nil)
    }

    @Test(arguments: StorageBackend.all)
    func aRefreshTokenRotatesOnceAndItsReuseRevokesTheFamily(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        try await storage.insertRefreshToken(tokenHash: "r1", familyId: session.familyId, at: Fixtures.now)
        #expect(try await storage.session(familyId: session.familyId, now: Fixtures.now) == session)
        #expect(try await storage.session(refreshTokenHash: "r1", now: Fixtures.now) == session)
        #expect(try await storage.session(refreshTokenHash: "r1", now: session.expiresAt) == nil, "an expired session is none")
        #expect(try await storage.session(refreshTokenHash: "r2", now: Fixtures.now) == nil)
        #expect(try await storage.rotateRefreshToken(tokenHash: "r1", successorHash: "r2", now: Fixtures.now) == .rotated(session))
        #expect(try await storage.session(refreshTokenHash: "r2", now: Fixtures.now) == session)
        #expect(try await storage.rotateRefreshToken(tokenHash: "r2", successorHash: "r3", now: Fixtures.now) == .rotated(session))
        // r1 again: stolen or replayed. The family ends, r3 with it.
        #expect(try await storage.rotateRefreshToken(tokenHash: "r1", successorHash: "r4", now: Fixtures.now) == .reused)
        #expect(try await storage.session(familyId: session.familyId, now: Fixtures.now) == nil)
        #expect(try await storage.session(idHash: session.idHash, now: Fixtures.now) == nil)
        #expect(try await storage.session(refreshTokenHash: "r3", now: Fixtures.now) == nil)
        #expect(try await storage.rotateRefreshToken(tokenHash: "r3", successorHash: "r5", now: Fixtures.now) == .unknown)
        #expect(try await storage.rotateRefreshToken(tokenHash: "never", successorHash: "r6", now: Fixtures.now) == .unknown)
    }

    @Test(arguments: StorageBackend.all)
    func concurrentRotationsOfOneRefreshTokenHaveOneWinner(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        try await storage.insertRefreshToken(tokenHash: "r1", familyId: session.familyId, at: Fixtures.now)
        let outcomes = try await withThrowingTaskGroup(of: RefreshRotation.self) { group in
            for index in 0..<10 {
                group.addTask { try await storage.rotateRefreshToken(tokenHash: "r1", successorHash: "next-\(index)", now: Fixtures.now) }
            }
            return try await group.reduce(into: [RefreshRotation]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == .rotated(session) }.count == 1)
        #expect(outcomes.filter { $0 == .rotated(session) }.count + outcomes.filter { $0 == .reused || $0 == .unknown }.count == 10)
    }

    @Test(arguments: StorageBackend.all)
    func anExpiredSessionRotatesNothingAndSignOutEndsTheFamily(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let expired = Fixtures.session("old", uid: "u1", expiresIn: -1)
        let live = Fixtures.session("live", uid: "u1")
        try await storage.insertSession(expired)
        try await storage.insertSession(live)
        try await storage.insertRefreshToken(tokenHash: "old-r", familyId: expired.familyId, at: Fixtures.now)
        try await storage.insertRefreshToken(tokenHash: "live-r", familyId: live.familyId, at: Fixtures.now)
        #expect(try await storage.rotateRefreshToken(tokenHash: "old-r", successorHash: "x", now: Fixtures.now) == .unknown)
        try await storage.deleteSession(familyId: live.familyId)
        #expect(try await storage.rotateRefreshToken(tokenHash: "live-r", successorHash: "y", now: Fixtures.now) == .unknown)
    }

    @Test(arguments: StorageBackend.all)
    func aPendingCredentialIsTakenOnceBeforeItExpires(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let pending = Self.pending("p1", target: "u1")
        try await storage.insertPendingCredential(pending)
        try await storage.insertPendingCredential(Self.pending("p2", target: "u1", expiresIn: -1))
        #expect(try await storage.takePendingCredential(tokenHash: "p1", now: Fixtures.now) == pending)
        #expect(try await storage.takePendingCredential(tokenHash: "p1", now: Fixtures.now) == nil)
        #expect(try await storage.takePendingCredential(tokenHash: "p2", now: Fixtures.now) == nil)
    }

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

    static func pending(_ hash: String, target: String, expiresIn: TimeInterval = 600) -> PendingCredentialRecord {
        PendingCredentialRecord(
            tokenHash: hash, targetUid: target, providerId: "oidc.x", federatedId: "f-\(hash)", profileJSON: Data(#"{"a":1}"#.utf8),
            sealedTokens: "v1.k.s", verifiedEmail: "pat@example.com", expiresAt: Fixtures.now.addingTimeInterval(expiresIn))
    }
}
