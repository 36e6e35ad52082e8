import Foundation
import GatehouseCore
import Testing

/// The contract of `GatehouseStorage`, run against every backend in `StorageBackend.all`.
@Suite struct StorageConformanceTests {
    @Test(arguments: StorageBackend.all)
    func migrationIsRepeatableAndPingAnswers(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.migrate()
        try await storage.ping()
    }

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

    @Test("a spent token is recorded once across callers; a concurrent replay loses; purged after it expires", arguments: StorageBackend.all)
    func spentTokensAreSingleUse(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let wins = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 { group.addTask { try await storage.spendToken(hash: "t1", expiresAt: Fixtures.now.addingTimeInterval(60)) } }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(wins.filter { $0 }.count == 1)
        #expect(try await storage.spendToken(hash: "t2", expiresAt: Fixtures.now.addingTimeInterval(60)))
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
        // A token that cannot be stored (a family that does not exist) leaves the result in place.
        try await storage.insertResult(idHash: "kept", payload: Data("kept".utf8), expiresAt: Fixtures.now.addingTimeInterval(60))
        let orphan = NewRefreshToken(tokenHash: "t3", familyId: "no-such-family", issuedAt: Fixtures.now)
        await #expect(throws: (any Error).self) {
            try await storage.takeResult(idHash: "kept", now: Fixtures.now, redemption: .keeping(orphan, answer: "sealed-answer"))
        }
        #expect(try await storage.result(idHash: "kept", now: Fixtures.now) == .pending(Data("kept".utf8)))
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

    @Test(arguments: StorageBackend.all)
    func anAccountIsCreatedWithItsFirstLink(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let link = Fixtures.link("u1", federatedId: "583231")
        try await storage.createAccount(Fixtures.account("u1"), firstLink: link)
        #expect(try await storage.account(uid: "u1") == Fixtures.account("u1"))
        #expect(try await storage.link(providerId: "github.com", federatedId: "583231") == link)
        #expect(try await storage.links(uid: "u1") == [link])
        #expect(try await storage.account(uid: "nobody") == nil)
        #expect(try await storage.link(providerId: "oidc.x", federatedId: "583231") == nil)
    }

    @Test(arguments: StorageBackend.all)
    func anIdentityLinkedTwiceIsAConflictAndWritesNothing(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "583231"))
        await #expect(throws: StorageError.conflict) {
            try await storage.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", federatedId: "583231"))
        }
        // All or nothing: the second account does not exist without its link.
        #expect(try await storage.account(uid: "u2") == nil)
        #expect(try await storage.link(providerId: "github.com", federatedId: "583231")?.uid == "u1")
        await #expect(throws: StorageError.conflict) {
            try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "other"))
        }
        #expect(try await storage.link(providerId: "github.com", federatedId: "other") == nil)
    }

    @Test(arguments: StorageBackend.all)
    func racingFirstSignInsCreateOneAccount(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let created = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<10 {
                group.addTask {
                    do {
                        try await storage.createAccount(Fixtures.account("u\(index)"), firstLink: Fixtures.link("u\(index)", federatedId: "same"))
                        return 1
                    } catch StorageError.conflict {
                        return 0
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(created == 1)
        let owner = try #require(try await storage.link(providerId: "github.com", federatedId: "same")?.uid)
        #expect(try await storage.account(uid: owner) != nil)
    }

    @Test(arguments: StorageBackend.all)
    func aSignInReplacesTheLinkAndMovesLastSignIn(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let later = Fixtures.now.addingTimeInterval(120)
        var link = Fixtures.link("u1", federatedId: "1", tokens: "v1.k.new")
        link.updatedAt = later
        link.profileJSON = Data(#"{"name":"new"}"#.utf8)
        try await storage.recordSignIn(link: link, at: later)
        #expect(try await storage.link(providerId: "github.com", federatedId: "1") == link)
        let account = try #require(try await storage.account(uid: "u1"))
        #expect(account.lastSignInAt == later)
        #expect(account.createdAt == Fixtures.now)

        link.sealedTokens = "v1.k.refreshed"
        try await storage.updateLink(link)
        #expect(try await storage.link(providerId: "github.com", federatedId: "1")?.sealedTokens == "v1.k.refreshed")
        #expect(try await storage.account(uid: "u1")?.lastSignInAt == later)
    }

    @Test(arguments: StorageBackend.all)
    func anUpdateCannotMoveALinkToAnotherAccount(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", federatedId: "2"))
        try await storage.updateLink(Fixtures.link("u2", federatedId: "1", tokens: "v1.k.hijack"))
        let link = try #require(try await storage.link(providerId: "github.com", federatedId: "1"))
        #expect(link.uid == "u1")
        #expect(link.sealedTokens == "v1.k.sealed")
    }

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
        try await storage.deleteSessions(uid: "u1")
        #expect(try await storage.session(idHash: b.idHash, now: Fixtures.now) == nil)
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

    @Test(arguments: StorageBackend.all)
    func linksAreListedOldestFirst(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", provider: "oidc.z", federatedId: "z"))
        #expect(try await storage.links(uid: "u1").map(\.providerId) == ["oidc.z"])
        #expect(try await storage.links(uid: "nobody").isEmpty)
    }
}

/// The service-key and account-state part of the storage contract.
@Suite struct ServiceKeyStorageConformanceTests {
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
    func accountsAreFoundByTheWholeEmailOfAnyLink(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        var link = Fixtures.link("u1", federatedId: "1")
        link.profileJSON = Data(#"{"email":"Ada@Example.com"}"#.utf8)
        try await storage.createAccount(Fixtures.account("u1"), firstLink: link)
        var other = Fixtures.link("u2", federatedId: "2")
        other.profileJSON = Data(#"{"email":"not-ada@example.com"}"#.utf8)
        try await storage.createAccount(Fixtures.account("u2"), firstLink: other)
        #expect(try await storage.uids(email: "ada@example.com", limit: 10) == ["u1"])
        #expect(try await storage.uids(email: "example.com", limit: 10).isEmpty)
        #expect(try await storage.uids(email: "nobody@example.com", limit: 10).isEmpty)
    }

    @Test(arguments: StorageBackend.all)
    func accountsAreDisabledAndEnabled(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        #expect(try await storage.setDisabled(uid: "u1", disabled: true))
        #expect(try await storage.account(uid: "u1")?.disabled == true)
        #expect(try await storage.session(idHash: session.idHash, now: Fixtures.now) == nil, "disabling ends the sessions with it")
        #expect(try await storage.setDisabled(uid: "u1", disabled: false))
        #expect(try await storage.account(uid: "u1")?.disabled == false)
        #expect(try await storage.setDisabled(uid: "nobody", disabled: true) == false)
    }
}

/// The store's named locks (one provider-token refresh at a time across instances).
@Suite struct LockConformanceTests {
    /// Counts bodies running at once.
    actor Occupancy {
        private var now = 0
        private(set) var peak = 0
        func enter() {
            now += 1
            peak = max(peak, now)
        }
        func leave() { now -= 1 }
        /// How many are inside right now.
        var inside: Int { now }
    }

    @Test(
        "ten holders of one lock run one at a time; holders of different locks run side by side; an error releases it", arguments: StorageBackend.all)
    func locksExclude(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let same = Occupancy()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    try await storage.withLock("refresh|github.com|1") {
                        await same.enter()
                        try await Task.sleep(for: .milliseconds(20))
                        await same.leave()
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(await same.peak == 1)

        let different = Occupancy()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for name in ["refresh|a", "refresh|b"] {
                group.addTask {
                    try await storage.withLock(name) {
                        await different.enter()
                        // Waits (bounded) for the other holder: independent locks let it in
                        // meanwhile, whatever the machine's load; a lock that wrongly
                        // excluded it would leave the peak at 1.
                        for _ in 0..<250 where await different.inside < 2 { try await Task.sleep(for: .milliseconds(20)) }
                        await different.leave()
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(await different.peak == 2)

        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await storage.withLock("refresh|c") { throw Failure() } }
        #expect(try await storage.withLock("refresh|c") { 42 } == 42)
    }
}

/// What key rotation and live profile updates rely on.
@Suite struct LinkMaintenanceConformanceTests {
    @Test("links(after:limit:) pages through every link once, in (provider, federated id) byte order", arguments: StorageBackend.all)
    func pagesThroughAllLinks(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let identities = [("github.com", "10"), ("github.com", "9"), ("microsoft.com", "a"), ("github.com", "B"), ("oidc.x", "é")]
        for (index, identity) in identities.enumerated() {
            try await storage.createAccount(
                Fixtures.account("u\(index)"), firstLink: Fixtures.link("u\(index)", provider: identity.0, federatedId: identity.1))
        }
        var seen: [String] = []
        var cursor: LinkCursor?
        while true {
            let page = try await storage.links(after: cursor, limit: 2)
            seen += page.map { "\($0.providerId)|\($0.federatedId)" }
            guard let last = page.last, page.count == 2 else { break }
            cursor = LinkCursor(providerId: last.providerId, federatedId: last.federatedId)
        }
        #expect(seen == ["github.com|10", "github.com|9", "github.com|B", "microsoft.com|a", "oidc.x|é"])
    }

    @Test("replaceSealedTokens is a compare and set; updateLinkProfile leaves the tokens alone", arguments: StorageBackend.all)
    func compareAndSetAndProfileOnly(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "42", tokens: "v1.old.x"))
        #expect(try await storage.replaceSealedTokens(providerId: "github.com", federatedId: "42", expected: "v1.other.y", with: "v1.new.z") == false)
        #expect(try await storage.replaceSealedTokens(providerId: "github.com", federatedId: "42", expected: "v1.old.x", with: "v1.new.z"))
        try await storage.updateLinkProfile(
            providerId: "github.com", federatedId: "42", uid: "u1", profileJSON: Data(#"{"federatedId":"42","email":"a@b.example"}"#.utf8),
            verifiedEmail: "a@b.example", at: Fixtures.now.addingTimeInterval(5))
        try await storage.updateLinkProfile(
            providerId: "github.com", federatedId: "42", uid: "someone-else", profileJSON: Data("{}".utf8), verifiedEmail: nil, at: Fixtures.now)
        let link = try #require(try await storage.link(providerId: "github.com", federatedId: "42"))
        #expect(link.sealedTokens == "v1.new.z")
        #expect(link.profileJSON == Data(#"{"federatedId":"42","email":"a@b.example"}"#.utf8))
        #expect(link.updatedAt == Fixtures.now.addingTimeInterval(5))
        #expect(link.verifiedEmail == "a@b.example")
        #expect(try await storage.uids(verifiedEmail: "a@b.example", limit: 5) == ["u1"])
    }
}

extension ResultRedemption {
    /// A redemption that deletes the result (no retry window).
    static func deleting(_ token: NewRefreshToken?) -> ResultRedemption {
        ResultRedemption(refreshToken: token, sealedAnswer: nil, retryUntil: Fixtures.now)
    }

    /// A redemption that keeps `answer` for a 10-second retry window from `Fixtures.now`.
    static func keeping(_ token: NewRefreshToken?, answer: String) -> ResultRedemption {
        ResultRedemption(refreshToken: token, sealedAnswer: answer, retryUntil: Fixtures.now.addingTimeInterval(10))
    }
}
