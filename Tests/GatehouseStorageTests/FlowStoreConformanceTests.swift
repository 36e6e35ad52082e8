import Foundation
@_spi(Testing) import GatehouseCore
import Testing

/// The `FlowStore` part of the storage contract, run against every backend in
/// `StorageBackend.all`: sign-in transactions, one-time results (and their retry window), spent ID tokens.
@Suite struct FlowStoreConformanceTests {
    @Test(arguments: StorageBackend.all)
    func aTransactionIsTakenOnceAndOnlyWithItsBinding(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let transaction = Fixtures.transaction()
        try await storage.insertTransaction(transaction)
        #expect(try await storage.takeTransaction(stateHash: transaction.stateHash, bindingHash: SecureRandom.digest("other")) == nil)
        #expect(try await storage.takeTransaction(stateHash: transaction.stateHash, bindingHash: transaction.bindingHash) == transaction)
        #expect(try await storage.takeTransaction(stateHash: transaction.stateHash, bindingHash: transaction.bindingHash) == nil)
    }

    @Test(arguments: StorageBackend.all)
    func aTransactionWithoutResultChallengeKeepsNone(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        var transaction = Fixtures.transaction()
        transaction.resultChallenge = nil
        try await storage.insertTransaction(transaction)
        #expect(try await storage.takeTransaction(stateHash: transaction.stateHash, bindingHash: transaction.bindingHash) == transaction)
    }

    @Test(
        "a spent token is recorded once across callers; a concurrent replay loses; a released one may be spent again; purged after it expires",
        arguments: StorageBackend.all)
    func spentTokensAreSingleUse(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let wins = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 { group.addTask { try await storage.spendToken(hash: "t1", expiresAt: Fixtures.now.addingTimeInterval(60)) } }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        let holds = wins.filter { $0 }.count == 1
        #expect(holds)
        #expect(try await storage.spendToken(hash: "t2", expiresAt: Fixtures.now.addingTimeInterval(60)))
        // Released (its sign-in stored nothing), it may be spent again, once.
        try await storage.releaseToken(hash: "t2")
        #expect(try await storage.spendToken(hash: "t2", expiresAt: Fixtures.now.addingTimeInterval(60)))
        #expect(try await !storage.spendToken(hash: "t2", expiresAt: Fixtures.now.addingTimeInterval(60)))
        try await storage.purgeExpired(now: Fixtures.now.addingTimeInterval(61))
        // Expired markers are gone (their tokens are refused as expired anyway).
        #expect(try await storage.spendToken(hash: "t1", expiresAt: Fixtures.now.addingTimeInterval(120)))
    }

    @Test(arguments: StorageBackend.all)
    func concurrentTakesOfOneTransactionHaveOneWinner(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let transaction = Fixtures.transaction()
        try await storage.insertTransaction(transaction)
        let winners = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    try await storage.takeTransaction(stateHash: transaction.stateHash, bindingHash: transaction.bindingHash) == nil ? 0 : 1
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(winners == 1)
    }

    @Test(arguments: StorageBackend.all)
    func aResultIsTakenOnceAndNotAfterItExpires(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.insertResult(idHash: "live", payload: Data("payload".utf8), expiresAt: Fixtures.now.addingTimeInterval(60))
        try await storage.insertResult(idHash: "stale", payload: Data("old".utf8), expiresAt: Fixtures.now.addingTimeInterval(-1))
        #expect(try await storage.result(idHash: "live", now: Fixtures.now) == .pending(Data("payload".utf8)))
        #expect(try await storage.result(idHash: "live", now: Fixtures.now) == .pending(Data("payload".utf8)), "reading leaves it")
        #expect(try await storage.result(idHash: "stale", now: Fixtures.now) == nil)
        #expect(try await storage.takeResult(idHash: "live", now: Fixtures.now, redemption: .deleting(nil)))
        #expect(try await storage.takeResult(idHash: "live", now: Fixtures.now, redemption: .deleting(nil)) == false)
        #expect(try await storage.result(idHash: "live", now: Fixtures.now) == nil)
        #expect(try await storage.takeResult(idHash: "stale", now: Fixtures.now, redemption: .deleting(nil)) == false)
        // Taking an expired result still deletes it: a clock set back later cannot revive it.
        #expect(try await storage.takeResult(idHash: "stale", now: Fixtures.now.addingTimeInterval(-3600), redemption: .deleting(nil)) == false)
    }

    @Test(arguments: StorageBackend.all)
    func takingAResultStoresItsRefreshTokenInTheSameTransaction(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        try await storage.insertResult(idHash: "r", payload: Data("payload".utf8), expiresAt: Fixtures.now.addingTimeInterval(60))
        let first = NewRefreshToken(tokenHash: "t1", familyId: session.familyId, issuedAt: Fixtures.now)
        #expect(try await storage.takeResult(idHash: "r", now: Fixtures.now, redemption: .deleting(first)))
        #expect(try await storage.session(refreshTokenHash: "t1", now: Fixtures.now) == session)
        // Gone already: the second token is not stored.
        let second = NewRefreshToken(tokenHash: "t2", familyId: session.familyId, issuedAt: Fixtures.now)
        #expect(try await storage.takeResult(idHash: "r", now: Fixtures.now, redemption: .deleting(second)) == false)
        #expect(try await storage.session(refreshTokenHash: "t2", now: Fixtures.now) == nil)
        // A token whose session ended since it was read (a family that does not exist, or no
        // longer) is said as such and leaves the result in place.
        try await storage.insertResult(idHash: "kept", payload: Data("kept".utf8), expiresAt: Fixtures.now.addingTimeInterval(60))
        let orphan = NewRefreshToken(tokenHash: "t3", familyId: "no-such-family", issuedAt: Fixtures.now)
        await #expect(throws: StorageError.sessionGone) {
            try await storage.takeResult(idHash: "kept", now: Fixtures.now, redemption: .keeping(orphan, answer: "sealed-answer"))
        }
        #expect(try await storage.result(idHash: "kept", now: Fixtures.now) == .pending(Data("kept".utf8)))
        try await storage.deleteSession(familyId: session.familyId)
        let ended = NewRefreshToken(tokenHash: "t4", familyId: session.familyId, issuedAt: Fixtures.now)
        await #expect(throws: StorageError.sessionGone) {
            try await storage.takeResult(idHash: "kept", now: Fixtures.now, redemption: .deleting(ended))
        }
        #expect(try await storage.result(idHash: "kept", now: Fixtures.now) == .pending(Data("kept".utf8)))
    }

    @Test(arguments: StorageBackend.all)
    func aSessionEndsTheOneItReplacesInItsTransaction(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let old = Fixtures.session("old", uid: "u1")
        try await storage.insertSession(old)
        // A session whose first token is refused (a duplicate hash) is not written, nor is the
        // old one ended.
        let taken = Fixtures.session("taken", uid: "u1")
        try await storage.insertSession(taken, firstRefreshToken: NewRefreshToken(tokenHash: "t1", familyId: taken.familyId, issuedAt: Fixtures.now))
        let failing = Fixtures.session("failing", uid: "u1")
        await #expect(throws: (any Error).self) {
            try await storage.insertSession(
                failing, firstRefreshToken: NewRefreshToken(tokenHash: "t1", familyId: failing.familyId, issuedAt: Fixtures.now),
                ending: old.familyId)
        }
        #expect(try await storage.session(familyId: old.familyId, now: Fixtures.now) == old)
        #expect(try await storage.session(familyId: failing.familyId, now: Fixtures.now) == nil)
        // Written, it ends the old one with it.
        let new = Fixtures.session("new", uid: "u1")
        try await storage.insertSession(
            new, firstRefreshToken: NewRefreshToken(tokenHash: "t2", familyId: new.familyId, issuedAt: Fixtures.now), ending: old.familyId)
        #expect(try await storage.session(familyId: old.familyId, now: Fixtures.now) == nil)
        #expect(try await storage.session(refreshTokenHash: "t2", now: Fixtures.now) == new)
        // A disabled account's session is not written, and ends nothing.
        #expect(try await storage.setDisabled(uid: "u1", disabled: true) == .changed)
        try await storage.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", federatedId: "2"))
        let other = Fixtures.session("other", uid: "u2")
        try await storage.insertSession(other)
        await #expect(throws: StorageError.changedMeanwhile) {
            try await storage.insertSession(Fixtures.session("late", uid: "u1"), firstRefreshToken: nil, ending: other.familyId)
        }
        #expect(try await storage.session(familyId: other.familyId, now: Fixtures.now) == other)
    }

    @Test(arguments: StorageBackend.all)
    func takingAResultEndsTheSessionItReplacesInTheSameTransaction(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let (old, new) = (Fixtures.session("old", uid: "u1"), Fixtures.session("new", uid: "u1"))
        try await storage.insertSession(old)
        try await storage.insertSession(new)
        // A redemption that fails (its token's session is gone) leaves the old session.
        try await storage.insertResult(idHash: "r", payload: Data("payload".utf8), expiresAt: Fixtures.now.addingTimeInterval(60))
        var failing = ResultRedemption.deleting(NewRefreshToken(tokenHash: "t0", familyId: "no-such-family", issuedAt: Fixtures.now))
        failing.endsSession = old.familyId
        await #expect(throws: StorageError.sessionGone) { try await storage.takeResult(idHash: "r", now: Fixtures.now, redemption: failing) }
        #expect(try await storage.session(familyId: old.familyId, now: Fixtures.now) == old)
        // The redemption ends it with the new session's first token.
        var redemption = ResultRedemption.keeping(NewRefreshToken(tokenHash: "t1", familyId: new.familyId, issuedAt: Fixtures.now), answer: "sealed")
        redemption.endsSession = old.familyId
        #expect(try await storage.takeResult(idHash: "r", now: Fixtures.now, redemption: redemption))
        #expect(try await storage.session(familyId: old.familyId, now: Fixtures.now) == nil)
        #expect(try await storage.session(refreshTokenHash: "t1", now: Fixtures.now) == new)
        // Nothing left to redeem: a second redemption ends nothing.
        let third = Fixtures.session("third", uid: "u1")
        try await storage.insertSession(third)
        var late = ResultRedemption.deleting(nil)
        late.endsSession = third.familyId
        #expect(try await storage.takeResult(idHash: "r", now: Fixtures.now, redemption: late) == false)
        #expect(try await storage.session(familyId: third.familyId, now: Fixtures.now) == third)
    }

    @Test(arguments: StorageBackend.all)
    func aRedeemedResultKeepsItsAnswerForItsWindowWhileItsTokenIsUnused(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        try await storage.insertResult(idHash: "r", payload: Data("payload".utf8), expiresAt: Fixtures.now.addingTimeInterval(60))
        let token = NewRefreshToken(tokenHash: "t1", familyId: session.familyId, issuedAt: Fixtures.now)
        #expect(try await storage.takeResult(idHash: "r", now: Fixtures.now, redemption: .keeping(token, answer: "sealed-answer")))
        #expect(try await storage.session(refreshTokenHash: "t1", now: Fixtures.now) == session)
        // Read again inside the window: the kept answer, never the result a second time.
        #expect(try await storage.result(idHash: "r", now: Fixtures.now.addingTimeInterval(9)) == .redeemed(sealedAnswer: "sealed-answer"))
        let other = NewRefreshToken(tokenHash: "t2", familyId: session.familyId, issuedAt: Fixtures.now)
        #expect(try await storage.takeResult(idHash: "r", now: Fixtures.now, redemption: .keeping(other, answer: "second")) == false)
        #expect(try await storage.session(refreshTokenHash: "t2", now: Fixtures.now) == nil)
        // After the window, nothing.
        #expect(try await storage.result(idHash: "r", now: Fixtures.now.addingTimeInterval(10)) == nil)
        // Once the token it answered was used, nothing either: the answer is no longer current.
        #expect(try await storage.rotateRefreshToken(tokenHash: "t1", successor: .strict("t3"), now: Fixtures.now) == .rotated(session))
        #expect(try await storage.result(idHash: "r", now: Fixtures.now) == nil)
        // The purger removes a redeemed result once its window ended.
        try await storage.insertResult(idHash: "q", payload: Data("q".utf8), expiresAt: Fixtures.now.addingTimeInterval(60))
        #expect(try await storage.takeResult(idHash: "q", now: Fixtures.now, redemption: .keeping(nil, answer: "sealed-q")))
        #expect(try await storage.result(idHash: "q", now: Fixtures.now) == .redeemed(sealedAnswer: "sealed-q"))
        try await storage.purgeExpired(now: Fixtures.now.addingTimeInterval(11))
        #expect(try await storage.result(idHash: "q", now: Fixtures.now) == nil)
    }
}
