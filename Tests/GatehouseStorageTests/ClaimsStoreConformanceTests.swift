import Foundation
@_spi(Testing) import GatehouseCore
import Testing

/// Custom claims (per account) and session claims (per sign-in), run against every backend:
/// stored with the write that carries them, in its transaction, and read back by every read
/// that returns the account or the session.
@Suite struct ClaimsStoreConformanceTests {
    static let role = Data(#"{"role":"admin"}"#.utf8)
    static let plan = Data(#"{"plan":"pro"}"#.utf8)

    @Test(arguments: StorageBackend.all)
    func claimsTravelWithTheAccountAndTheSession(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        var account = Fixtures.account("u1")
        account.customClaims = Self.role
        try await storage.createAccount(account, firstLink: Fixtures.link("u1", federatedId: "1"))
        #expect(try await storage.account(uid: "u1")?.customClaims == Self.role)

        var session = Fixtures.session("s1", uid: "u1")
        session.claims = Self.plan
        try await storage.insertSession(session)
        #expect(try await storage.session(familyId: session.familyId, now: Fixtures.now)?.claims == Self.plan)
        let signedIn = try #require(try await storage.signedIn(.cookieHash(session.idHash), now: Fixtures.now))
        #expect(signedIn.session.claims == Self.plan)
        #expect(signedIn.account?.customClaims == Self.role)
    }

    @Test("sessionClaims lists the distinct own claims of the account's live sessions, up to the limit", arguments: StorageBackend.all)
    func sessionClaimsAreListedDistinct(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", federatedId: "2"))
        for (id, uid, claims, expiresIn) in [
            ("a", "u1", Self.plan, 3600.0), ("b", "u1", Self.plan, 3600), ("c", "u1", Self.role, 3600), ("d", "u1", nil, 3600),
            ("e", "u1", Data(#"{"old":true}"#.utf8), -1), ("f", "u2", Data(#"{"other":true}"#.utf8), 3600),
        ] {
            var session = Fixtures.session(id, uid: uid, expiresIn: expiresIn)
            session.claims = claims
            try await storage.insertSession(session)
        }
        let listed = try await storage.sessionClaims(uid: "u1", now: Fixtures.now, limit: 10)
        #expect(Set(listed) == [Self.plan, Self.role] && listed.count == 2, "distinct, live, this account's: \(listed.count)")
        #expect(try await storage.sessionClaims(uid: "u1", now: Fixtures.now, limit: 1).count == 1)
        #expect(try await storage.sessionClaims(uid: "nobody", now: Fixtures.now, limit: 10).isEmpty)
    }

    @Test(arguments: StorageBackend.all)
    func eachWriteReplacesTheClaimsOnlyWhenAsked(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        #expect(try await storage.account(uid: "u1")?.customClaims == nil)

        try await storage.recordSignIn(
            link: Fixtures.link("u1", federatedId: "1"), at: Fixtures.now, replacingClaims: ClaimsReplacement(stored: Self.role))
        #expect(try await storage.account(uid: "u1")?.customClaims == Self.role)
        try await storage.recordSignIn(link: Fixtures.link("u1", federatedId: "1"), at: Fixtures.now, replacingClaims: nil)
        #expect(try await storage.account(uid: "u1")?.customClaims == Self.role, "nil leaves them")

        try await storage.addLink(
            Fixtures.link("u1", provider: "oidc.x", federatedId: "2"), consumingPending: nil, replacingClaims: ClaimsReplacement(stored: Self.plan))
        #expect(try await storage.account(uid: "u1")?.customClaims == Self.plan)
        try await storage.updateLink(Fixtures.link("u1", federatedId: "1"), consumingPending: nil, replacingClaims: ClaimsReplacement(stored: nil))
        #expect(try await storage.account(uid: "u1")?.customClaims == nil)

        #expect(try await storage.setCustomClaims(uid: "u1", ClaimsReplacement(stored: Self.role)) == .changed)
        #expect(try await storage.account(uid: "u1")?.customClaims == Self.role)
        #expect(try await storage.setCustomClaims(uid: "u1", ClaimsReplacement(stored: Self.role)) == .unchanged, "the same claims again")
        #expect(try await storage.setCustomClaims(uid: "nobody", ClaimsReplacement(stored: Self.role)) == .notFound)
    }

    @Test(arguments: StorageBackend.all)
    func aRefusedLinkLeavesTheClaimsAsTheyWere(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", federatedId: "2"))
        // The identity is u2's: the link is a conflict, and the claims of its transaction are not kept.
        await #expect(throws: StorageError.conflict) {
            try await storage.addLink(
                Fixtures.link("u1", federatedId: "2"), consumingPending: nil, replacingClaims: ClaimsReplacement(stored: Self.role))
        }
        #expect(try await storage.account(uid: "u1")?.customClaims == nil)
    }

    @Test(arguments: StorageBackend.all)
    func aReplacementFromOlderClaimsCommitsNothing(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        var account = Fixtures.account("u1")
        account.customClaims = Self.role
        try await storage.createAccount(account, firstLink: Fixtures.link("u1", federatedId: "1"))
        // A hook answered for {"role":"admin"}; a service replaced them meanwhile.
        #expect(try await storage.setCustomClaims(uid: "u1", ClaimsReplacement(stored: Self.plan)) == .changed)
        let stale = ClaimsReplacement(stored: Data(#"{"role":"admin","team":"red"}"#.utf8), basis: Self.role)
        var moved = Fixtures.link("u1", federatedId: "1")
        moved.sealedTokens = "sealed-later"
        await #expect(throws: StorageError.changedMeanwhile) {
            try await storage.recordSignIn(link: moved, at: Fixtures.now.addingTimeInterval(60), replacingClaims: stale)
        }
        await #expect(throws: StorageError.changedMeanwhile) {
            try await storage.updateLink(moved, consumingPending: nil, replacingClaims: stale)
        }
        await #expect(throws: StorageError.changedMeanwhile) {
            try await storage.addLink(
                Fixtures.link("u1", provider: "oidc.x", federatedId: "3"), consumingPending: nil, replacingClaims: stale)
        }
        // Nothing of those writes was committed: the claims, the link and the account as they were.
        #expect(try await storage.account(uid: "u1")?.customClaims == Self.plan)
        #expect(try await storage.account(uid: "u1")?.lastSignInAt == account.lastSignInAt)
        #expect(try await storage.link(providerId: "github.com", federatedId: "1")?.sealedTokens != "sealed-later")
        #expect(try await storage.link(providerId: "oidc.x", federatedId: "3") == nil)
        await #expect(throws: StorageError.changedMeanwhile) { try await storage.setCustomClaims(uid: "u1", stale) }
        #expect(try await storage.account(uid: "u1")?.customClaims == Self.plan)
        #expect(try await storage.setCustomClaims(uid: "nobody", stale) == .notFound)
        // From the claims as they are, the replacement is written, a missing basis (none) too.
        try await storage.recordSignIn(link: moved, at: Fixtures.now, replacingClaims: ClaimsReplacement(stored: Self.role, basis: Self.plan))
        #expect(try await storage.account(uid: "u1")?.customClaims == Self.role)
        #expect(try await storage.setCustomClaims(uid: "u1", ClaimsReplacement(stored: nil, basis: Self.role)) == .changed)
        try await storage.updateLink(moved, consumingPending: nil, replacingClaims: ClaimsReplacement(stored: Self.plan, basis: nil))
        #expect(try await storage.account(uid: "u1")?.customClaims == Self.plan)
    }
}
