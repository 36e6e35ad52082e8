import Foundation
@_spi(Testing) import GatehouseCore
import Testing

/// The `SessionStore` part of the storage contract, run against every backend in
/// `StorageBackend.all`: sessions and refresh-token families: rotation, reuse, the retry window, expiry.
@Suite struct SessionStoreConformanceTests {
    @Test(arguments: StorageBackend.all)
    func sessionsExpireAndEnd(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let a = Fixtures.session("a", uid: "u1")
        let b = Fixtures.session("b", uid: "u1")
        let old = Fixtures.session("old", uid: "u1", expiresIn: -1)
        for session in [a, b, old] { try await storage.insertSession(session) }
        #expect(try await storage.session(idHash: a.idHash, now: Fixtures.now) == a)
        #expect(try await storage.session(idHash: old.idHash, now: Fixtures.now) == nil)
        #expect(try await storage.session(idHash: a.idHash, now: a.expiresAt) == nil)

        try await storage.deleteSession(idHash: a.idHash)
        #expect(try await storage.session(idHash: a.idHash, now: Fixtures.now) == nil)
        #expect(try await storage.session(idHash: b.idHash, now: Fixtures.now) == b)
        try await storage.deleteSessions(uid: "u1", now: Fixtures.now)
        #expect(try await storage.session(idHash: b.idHash, now: Fixtures.now) == nil)
    }

    @Test(arguments: StorageBackend.all)
    func aSessionKeepsWhenItsUserAuthenticated(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        // Signed in through the provider's own session, authenticated there two hours before.
        var earlier = Fixtures.session("earlier", uid: "u1")
        earlier.authenticatedAt = earlier.createdAt.addingTimeInterval(-7200)
        earlier.firstUse = SessionUse(at: Fixtures.now, clientAddress: "192.0.2.1", userAgent: nil)
        let plain = Fixtures.session("plain", uid: "u1")
        #expect(plain.authenticatedAt == plain.createdAt)
        try await storage.insertSession(earlier)
        try await storage.insertSession(plain)
        #expect(try await storage.session(idHash: earlier.idHash, now: Fixtures.now)?.authenticatedAt == earlier.authenticatedAt)
        #expect(try await storage.session(idHash: plain.idHash, now: Fixtures.now) == plain)
        #expect(try await storage.signedIn(.cookieHash(earlier.idHash), now: Fixtures.now)?.session.authenticatedAt == earlier.authenticatedAt)
        #expect(try await storage.signedIn(.family(earlier.familyId), now: Fixtures.now)?.session.authenticatedAt == earlier.authenticatedAt)
        let listed = try await storage.sessions(uid: "u1", now: Fixtures.now)
        #expect(Set(listed.map(\.authenticatedAt)) == [earlier.authenticatedAt, plain.createdAt])
    }

    @Test(arguments: StorageBackend.all)
    func noSessionForADisabledOrMissingAccount(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        // Disabled while its sign-in was under way (a hook asked): the session is not written,
        // or it would outlive the disable and count again once the account is enabled.
        _ = try await storage.setDisabled(uid: "u1", disabled: true)
        var session = Fixtures.session("s1", uid: "u1")
        session.firstUse = SessionUse(at: Fixtures.now, clientAddress: "192.0.2.1", userAgent: nil)
        await #expect(throws: StorageError.changedMeanwhile) { try await storage.insertSession(session) }
        #expect(try await storage.session(idHash: session.idHash, now: Fixtures.now) == nil)
        await #expect(throws: StorageError.changedMeanwhile) { try await storage.insertSession(Fixtures.session("s2", uid: "gone")) }
        _ = try await storage.setDisabled(uid: "u1", disabled: false)
        #expect(try await storage.session(idHash: session.idHash, now: Fixtures.now) == nil, "enabling brings back nothing")
        try await storage.insertSession(session)
        #expect(try await storage.session(idHash: session.idHash, now: Fixtures.now)?.uid == "u1")
    }

    @Test(arguments: StorageBackend.all)
    func signedInReadsSessionAccountAndLinksTogether(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.addLink(Fixtures.link("u1", provider: "oidc.x", federatedId: "x1"))
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        let byCookie = try #require(try await storage.signedIn(.cookieHash(session.idHash), now: Fixtures.now))
        #expect(byCookie.session == session)
        #expect(byCookie.account == (try await storage.account(uid: "u1")))
        #expect(byCookie.links == (try await storage.links(uid: "u1")) && byCookie.links.map(\.providerId) == ["github.com", "oidc.x"])
        #expect(try await storage.signedIn(.family(session.familyId), now: Fixtures.now) == byCookie)
        #expect(try await storage.signedIn(.cookieHash(session.idHash), now: session.expiresAt) == nil, "an expired session is none")
        #expect(try await storage.signedIn(.cookieHash("unknown"), now: Fixtures.now) == nil)
        #expect(try await storage.signedIn(.family("unknown"), now: Fixtures.now) == nil)
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
        #expect(
            try await storage.rotateRefreshToken(tokenHash: "r1", successor: .strict("r4"), now: Fixtures.now) == .reused(familyId: session.familyId))
        #expect(try await storage.session(familyId: session.familyId, now: Fixtures.now) == nil)
        #expect(try await storage.session(idHash: session.idHash, now: Fixtures.now) == nil)
        #expect(try await storage.session(refreshTokenHash: "r3", now: Fixtures.now) == nil)
        #expect(try await storage.rotateRefreshToken(tokenHash: "r3", successor: .strict("r5"), now: Fixtures.now) == .unknown)
        #expect(try await storage.rotateRefreshToken(tokenHash: "never", successor: .strict("r6"), now: Fixtures.now) == .unknown)
        // The ended session takes no new token (a sign-in's first one, issued as the session
        // was signed out everywhere): said as such, nothing stored.
        await #expect(throws: StorageError.sessionGone) {
            try await storage.insertRefreshToken(tokenHash: "r7", familyId: session.familyId, at: Fixtures.now)
        }
        #expect(try await storage.rotateRefreshToken(tokenHash: "r7", successor: .strict("r8"), now: Fixtures.now) == .unknown)
    }

    @Test(arguments: StorageBackend.all)
    func aStolenTokenStaysAReuseHoweverOftenTheThiefRotates(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        try await storage.insertRefreshToken(tokenHash: "t0", familyId: session.familyId, at: Fixtures.now)
        // A thief spends the owner's token and rotates on, many times, within a minute or two.
        let rotations = 100
        for index in 0..<rotations {
            let at = Fixtures.now.addingTimeInterval(Double(index))
            #expect(try await storage.rotateRefreshToken(tokenHash: "t\(index)", successor: .strict("t\(index + 1)"), now: at) == .rotated(session))
        }
        // The owner's token, spent first, is still a reuse: the family ends (the session itself
        // lives an hour).
        let later = Fixtures.now.addingTimeInterval(Double(rotations) + 60)
        #expect(try await storage.session(familyId: session.familyId, now: later) == session)
        #expect(try await storage.rotateRefreshToken(tokenHash: "t0", successor: .strict("owner"), now: later) == .reused(familyId: session.familyId))
        #expect(try await storage.session(familyId: session.familyId, now: later) == nil)
    }

    @Test(arguments: StorageBackend.all)
    func aFamilyEndsAtItsLimitOfTokens(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        try await storage.insertRefreshToken(tokenHash: "t0", familyId: session.familyId, at: Fixtures.now)
        let other = Fixtures.session("s2", uid: "u1")
        try await storage.insertSession(other)
        try await storage.insertRefreshToken(tokenHash: "o0", familyId: other.familyId, at: Fixtures.now)
        func successor(_ hash: String) -> RefreshSuccessor {
            var successor = RefreshSuccessor.strict(hash)
            successor.familyLimit = 3
            return successor
        }
        // Three tokens: the first and two successors, the last kept for the retry window.
        #expect(try await storage.rotateRefreshToken(tokenHash: "t0", successor: successor("t1"), now: Fixtures.now) == .rotated(session))
        var kept = RefreshSuccessor.kept("t2")
        kept.familyLimit = 3
        #expect(try await storage.rotateRefreshToken(tokenHash: "t1", successor: kept, now: Fixtures.now) == .rotated(session))
        // A retry at the limit still gets its successor back: it stores nothing.
        #expect(
            try await storage.rotateRefreshToken(tokenHash: "t1", successor: successor("x"), now: Fixtures.now)
                == .retried(session, sealedSuccessor: "sealed-t2"))
        // The family holds its three: the live token rotates nothing and the session ends.
        #expect(try await storage.rotateRefreshToken(tokenHash: "t2", successor: successor("t3"), now: Fixtures.now) == .exhausted(session))
        #expect(try await storage.session(familyId: session.familyId, now: Fixtures.now) == nil)
        #expect(try await storage.session(refreshTokenHash: "t3", now: Fixtures.now) == nil, "nothing stored")
        #expect(try await storage.rotateRefreshToken(tokenHash: "t2", successor: successor("t4"), now: Fixtures.now) == .unknown)
        // Another family of the same account counts its own tokens.
        #expect(try await storage.rotateRefreshToken(tokenHash: "o0", successor: successor("o1"), now: Fixtures.now) == .rotated(other))
        #expect(try await storage.session(familyId: other.familyId, now: Fixtures.now) == other)
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
        let holds = outcomes.filter { $0 == .rotated(session) }.count == 1
        #expect(holds)
        let holds2 =
            outcomes.filter { $0 == .rotated(session) }.count + outcomes.filter { $0 == .reused(familyId: session.familyId) || $0 == .unknown }.count
            == 10
        #expect(holds2)
    }

    @Test(arguments: StorageBackend.all)
    func concurrentRotationsInsideTheRetryWindowAllGetTheWinnersSuccessor(_ backend: StorageBackend) async throws {
        let (storage, session, outcomes) = try await Self.tenConcurrentRotations(backend) { .kept("next-\($0)") }
        let holds = outcomes.filter { $0 == .rotated(session) }.count == 1
        #expect(holds)
        let kept = outcomes.compactMap { outcome -> String? in
            if case .retried(let found, let sealed) = outcome, found == session { return sealed }
            return nil
        }
        #expect(kept.count == 9)
        // Every retry got the one successor that was stored: the winner's.
        let foundWinner = kept.first.map { String($0.dropFirst("sealed-".count)) }
        let winner = try #require(foundWinner)
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
        #expect(
            try await storage.rotateRefreshToken(tokenHash: "a-r1", successor: .kept("z"), now: Fixtures.now.addingTimeInterval(10))
                == .reused(familyId: a.familyId))
        #expect(try await storage.session(familyId: a.familyId, now: later) == nil)
        // Once the successor was spent, the predecessor has no window left (nor any older one).
        let b = try await family("b")
        #expect(try await storage.rotateRefreshToken(tokenHash: "b-r2", successor: .kept("b-r3"), now: Fixtures.now) == .rotated(b))
        #expect(
            try await storage.rotateRefreshToken(tokenHash: "b-r2", successor: .kept("w"), now: Fixtures.now)
                == .retried(b, sealedSuccessor: "sealed-b-r3"))
        #expect(try await storage.rotateRefreshToken(tokenHash: "b-r1", successor: .kept("v"), now: Fixtures.now) == .reused(familyId: b.familyId))
        #expect(try await storage.session(familyId: b.familyId, now: Fixtures.now) == nil)
        // Strict (no sealed successor): the first reuse revokes.
        let c = Fixtures.session("c", uid: "u1")
        try await storage.insertSession(c)
        try await storage.insertRefreshToken(tokenHash: "c-r1", familyId: c.familyId, at: Fixtures.now)
        #expect(try await storage.rotateRefreshToken(tokenHash: "c-r1", successor: .strict("c-r2"), now: Fixtures.now) == .rotated(c))
        #expect(try await storage.rotateRefreshToken(tokenHash: "c-r1", successor: .strict("u"), now: Fixtures.now) == .reused(familyId: c.familyId))
        // The purger wipes a kept successor whose window ended: even a clock set back finds none.
        let d = try await family("d")
        try await storage.purgeExpired(now: Fixtures.now.addingTimeInterval(11))
        #expect(try await storage.rotateRefreshToken(tokenHash: "d-r1", successor: .kept("t"), now: Fixtures.now) == .reused(familyId: d.familyId))
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
}
