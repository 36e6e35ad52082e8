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
        #expect(try await storage.rotateRefreshToken(tokenHash: "r1", successor: .strict("r2"), now: Fixtures.now) == .unknown)
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
        #expect(try await storage.rotateRefreshToken(tokenHash: "r1", successor: .strict("r2"), now: Fixtures.now) == .rotated(session))
        #expect(try await storage.session(refreshTokenHash: "r2", now: Fixtures.now) == session)
        #expect(try await storage.rotateRefreshToken(tokenHash: "r2", successor: .strict("r3"), now: Fixtures.now) == .rotated(session))
        // r1 again: stolen or replayed. The family ends, r3 with it.
        #expect(try await storage.rotateRefreshToken(tokenHash: "r1", successor: .strict("r4"), now: Fixtures.now) == .reused)
        #expect(try await storage.session(familyId: session.familyId, now: Fixtures.now) == nil)
        #expect(try await storage.session(idHash: session.idHash, now: Fixtures.now) == nil)
        #expect(try await storage.session(refreshTokenHash: "r3", now: Fixtures.now) == nil)
        #expect(try await storage.rotateRefreshToken(tokenHash: "r3", successor: .strict("r5"), now: Fixtures.now) == .unknown)
        #expect(try await storage.rotateRefreshToken(tokenHash: "never", successor: .strict("r6"), now: Fixtures.now) == .unknown)
    }

    /// A session with refresh token `r1`, rotated ten times at once with `successor(i)`.
    static func tenConcurrentRotations(
        _ backend: StorageBackend, successor: @escaping @Sendable (Int) -> RefreshSuccessor
    ) async throws -> (any GatehouseStorage, SessionRecord, [RefreshRotation]) {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        try await storage.insertRefreshToken(tokenHash: "r1", familyId: session.familyId, at: Fixtures.now)
        let outcomes = try await withThrowingTaskGroup(of: RefreshRotation.self) { group in
            for index in 0..<10 {
                group.addTask { try await storage.rotateRefreshToken(tokenHash: "r1", successor: successor(index), now: Fixtures.now) }
            }
            return try await group.reduce(into: [RefreshRotation]()) { $0.append($1) }
        }
        return (storage, session, outcomes)
    }

    @Test(arguments: StorageBackend.all)
    func concurrentRotationsOfOneRefreshTokenHaveOneWinner(_ backend: StorageBackend) async throws {
        let (_, session, outcomes) = try await Self.tenConcurrentRotations(backend) { .strict("next-\($0)") }
        #expect(outcomes.filter { $0 == .rotated(session) }.count == 1)
        #expect(outcomes.filter { $0 == .rotated(session) }.count + outcomes.filter { $0 == .reused || $0 == .unknown }.count == 10)
    }

    @Test(arguments: StorageBackend.all)
    func concurrentRotationsInsideTheRetryWindowAllGetTheWinnersSuccessor(_ backend: StorageBackend) async throws {
        let (storage, session, outcomes) = try await Self.tenConcurrentRotations(backend) { .kept("next-\($0)") }
        #expect(outcomes.filter { $0 == .rotated(session) }.count == 1)
        let kept = outcomes.compactMap { outcome -> String? in
            if case .retried(let found, let sealed) = outcome, found == session { return sealed }
            return nil
        }
        #expect(kept.count == 9)
        // Every retry got the one successor that was stored: the winner's.
        let winner = try #require(kept.first.map { String($0.dropFirst("sealed-".count)) })
        #expect(Set(kept) == ["sealed-\(winner)"])
        #expect(try await storage.session(refreshTokenHash: winner, now: Fixtures.now) == session)
        #expect(try await storage.rotateRefreshToken(tokenHash: winner, successor: .kept("after"), now: Fixtures.now) == .rotated(session))
    }

    @Test(arguments: StorageBackend.all)
    func onlyTheLastSpentTokenGetsItsSuccessorBackAndOnlyInsideItsWindow(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        func family(_ id: String) async throws -> SessionRecord {
            let session = Fixtures.session(id, uid: "u1")
            try await storage.insertSession(session)
            try await storage.insertRefreshToken(tokenHash: "\(id)-r1", familyId: session.familyId, at: Fixtures.now)
            #expect(try await storage.rotateRefreshToken(tokenHash: "\(id)-r1", successor: .kept("\(id)-r2"), now: Fixtures.now) == .rotated(session))
            return session
        }
        // Inside the window the spent token returns the kept successor, as often as asked.
        let a = try await family("a")
        let later = Fixtures.now.addingTimeInterval(9)
        #expect(
            try await storage.rotateRefreshToken(tokenHash: "a-r1", successor: .kept("x"), now: later) == .retried(a, sealedSuccessor: "sealed-a-r2"))
        #expect(
            try await storage.rotateRefreshToken(tokenHash: "a-r1", successor: .kept("y"), now: later) == .retried(a, sealedSuccessor: "sealed-a-r2"))
        #expect(try await storage.session(refreshTokenHash: "x", now: later) == nil, "a retry stores no successor")
        // At the window's end the same use is a reuse: the family is revoked.
        #expect(try await storage.rotateRefreshToken(tokenHash: "a-r1", successor: .kept("z"), now: Fixtures.now.addingTimeInterval(10)) == .reused)
        #expect(try await storage.session(familyId: a.familyId, now: later) == nil)
        // Once the successor was spent, the predecessor has no window left (nor any older one).
        let b = try await family("b")
        #expect(try await storage.rotateRefreshToken(tokenHash: "b-r2", successor: .kept("b-r3"), now: Fixtures.now) == .rotated(b))
        #expect(
            try await storage.rotateRefreshToken(tokenHash: "b-r2", successor: .kept("w"), now: Fixtures.now)
                == .retried(b, sealedSuccessor: "sealed-b-r3"))
        #expect(try await storage.rotateRefreshToken(tokenHash: "b-r1", successor: .kept("v"), now: Fixtures.now) == .reused)
        #expect(try await storage.session(familyId: b.familyId, now: Fixtures.now) == nil)
        // Strict (no sealed successor): the first reuse revokes.
        let c = Fixtures.session("c", uid: "u1")
        try await storage.insertSession(c)
        try await storage.insertRefreshToken(tokenHash: "c-r1", familyId: c.familyId, at: Fixtures.now)
        #expect(try await storage.rotateRefreshToken(tokenHash: "c-r1", successor: .strict("c-r2"), now: Fixtures.now) == .rotated(c))
        #expect(try await storage.rotateRefreshToken(tokenHash: "c-r1", successor: .strict("u"), now: Fixtures.now) == .reused)
        // The purger wipes a kept successor whose window ended: even a clock set back finds none.
        let d = try await family("d")
        try await storage.purgeExpired(now: Fixtures.now.addingTimeInterval(11))
        #expect(try await storage.rotateRefreshToken(tokenHash: "d-r1", successor: .kept("t"), now: Fixtures.now) == .reused)
        #expect(try await storage.session(familyId: d.familyId, now: Fixtures.now) == nil)
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
        #expect(try await storage.rotateRefreshToken(tokenHash: "old-r", successor: .strict("x"), now: Fixtures.now) == .unknown)
        try await storage.deleteSession(familyId: live.familyId)
        #expect(try await storage.rotateRefreshToken(tokenHash: "live-r", successor: .strict("y"), now: Fixtures.now) == .unknown)
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
    func aClaimReadsThePendingCredentialAndConsumesItWithTheLink(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let pending = Self.pending("p1", target: "u1")
        try await storage.insertPendingCredential(pending)
        try await storage.insertPendingCredential(Self.pending("p2", target: "u1", expiresIn: -1))
        #expect(try await storage.pendingCredential(tokenHash: "p1", now: Fixtures.now) == pending)
        #expect(try await storage.pendingCredential(tokenHash: "p1", now: Fixtures.now) == pending, "reading leaves it")
        #expect(try await storage.pendingCredential(tokenHash: "p2", now: Fixtures.now) == nil)
        // A link that cannot be added (the provider slot is taken) consumes nothing.
        await #expect(throws: StorageError.conflict) {
            try await storage.addLink(Fixtures.link("u1", federatedId: "other"), consumingPending: "p1")
        }
        #expect(try await storage.pendingCredential(tokenHash: "p1", now: Fixtures.now) == pending)
        try await storage.addLink(Fixtures.link("u1", provider: "oidc.x", federatedId: "f-p1"), consumingPending: "p1")
        #expect(try await storage.pendingCredential(tokenHash: "p1", now: Fixtures.now) == nil)
        #expect(try await storage.links(uid: "u1").count == 2)
        // Updating a link can consume one too.
        try await storage.insertPendingCredential(Self.pending("p3", target: "u1"))
        try await storage.updateLink(Fixtures.link("u1", provider: "oidc.x", federatedId: "f-p1"), consumingPending: "p3")
        #expect(try await storage.pendingCredential(tokenHash: "p3", now: Fixtures.now) == nil)
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

extension RefreshSuccessor {
    /// A successor kept (as `sealed-<hash>`) for a 10-second retry window from `Fixtures.now`.
    static func kept(_ hash: String) -> RefreshSuccessor {
        RefreshSuccessor(tokenHash: hash, sealedToken: "sealed-\(hash)", retryUntil: Fixtures.now.addingTimeInterval(10))
    }

    /// A successor with no retry window.
    static func strict(_ hash: String) -> RefreshSuccessor {
        RefreshSuccessor(tokenHash: hash, sealedToken: nil, retryUntil: Fixtures.now)
    }
}
