import Foundation
@_spi(Testing) import GatehouseCore
import Testing

/// Operators' lookups, run against every backend: account search (uid, identity, email and
/// name, wildcards literal) in byte order with a cursor, and an account's live sessions.
@Suite struct AdminStoreConformanceTests {
    static func link(_ uid: String, federatedId: String, email: String, name: String) -> ProviderLinkRecord {
        var link = Fixtures.link(uid, federatedId: federatedId)
        link.profileJSON = Data(#"{"federatedId":"\#(federatedId)","email":"\#(email)","displayName":"\#(name)","providerId":"github.com"}"#.utf8)
        return link
    }

    @Test(arguments: StorageBackend.all)
    func searchFindsByEachKeyAndPagesInByteOrder(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(
            Fixtures.account("b-uid"), firstLink: Self.link("b-uid", federatedId: "200", email: "Bo@Example.com", name: "Bo 100%"))
        try await storage.createAccount(
            Fixtures.account("a-uid"), firstLink: Self.link("a-uid", federatedId: "100", email: "al@example.org", name: "Al"))
        try await storage.createAccount(
            Fixtures.account("C-uid"), firstLink: Self.link("C-uid", federatedId: "300", email: "cy@example.net", name: "Cy_x"))
        // A decomposed é: `e` then U+0301 COMBINING ACUTE ACCENT.
        try await storage.createAccount(
            Fixtures.account("d-uid"), firstLink: Self.link("d-uid", federatedId: "400", email: "zoe@example.net", name: "Zoe\u{301}"))
        try await storage.createAccount(
            Fixtures.account("e-uid"), firstLink: Self.link("e-uid", federatedId: "500", email: "ÉLODIE@EXÄMPLE.org", name: "Ünal"))
        try await storage.createAccount(
            Fixtures.account("f-uid"), firstLink: Self.link("f-uid", federatedId: "600", email: "np@example.gr", name: "Νίκος ΠΑΠΑΣ"))
        #expect(
            try await storage.searchAccounts(.all, after: nil, limit: 10) == ["C-uid", "a-uid", "b-uid", "d-uid", "e-uid", "f-uid"], "byte order")
        #expect(try await storage.searchAccounts(.all, after: "C-uid", limit: 1) == ["a-uid"])
        #expect(try await storage.searchAccounts(AccountSearch("bo@example"), after: nil, limit: 10) == ["b-uid"])
        #expect(try await storage.searchAccounts(AccountSearch("a-uid"), after: nil, limit: 10) == ["a-uid"])
        #expect(try await storage.searchAccounts(AccountSearch("github.com:300"), after: nil, limit: 10) == ["C-uid"])
        #expect(try await storage.searchAccounts(AccountSearch("100%"), after: nil, limit: 10) == ["b-uid"], "% is text")
        #expect(try await storage.searchAccounts(AccountSearch("y_"), after: nil, limit: 10) == ["C-uid"], "_ is text")
        #expect(try await storage.searchAccounts(AccountSearch("%"), after: nil, limit: 10) == ["b-uid"])
        #expect(try await storage.searchAccounts(AccountSearch("' OR 1=1 --"), after: nil, limit: 10).isEmpty)
        // Canonically equivalent texts match: a decomposed é finds the precomposed É of e-uid too.
        #expect(try await storage.searchAccounts(AccountSearch("e\u{301}"), after: nil, limit: 10) == ["d-uid", "e-uid"])
        // Case beyond ASCII, either way round.
        #expect(try await storage.searchAccounts(AccountSearch("élodie@exä"), after: nil, limit: 10) == ["e-uid"])
        #expect(try await storage.searchAccounts(AccountSearch("ÜNAL"), after: nil, limit: 10) == ["e-uid"])
        #expect(try await storage.searchAccounts(AccountSearch("ΠΑΠΑΣ"), after: nil, limit: 10) == ["f-uid"], "a final sigma either way")
        #expect(try await storage.searchAccounts(AccountSearch("παπας"), after: nil, limit: 10) == ["f-uid"])
        // `_` + U+0301 is one Character: escaped per Character, its `_` would stay a wildcard
        // and match the `e` before the accent.
        #expect(try await storage.searchAccounts(AccountSearch("_\u{301}"), after: nil, limit: 10).isEmpty, "_ before a combining mark is text")
    }

    @Test(arguments: StorageBackend.all)
    func anAccountsLiveSessionsNewestFirst(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", federatedId: "2"))
        var older = Fixtures.session("s1", uid: "u1")
        older.createdAt = Fixtures.now.addingTimeInterval(-60)
        try await storage.insertSession(older)
        try await storage.insertSession(Fixtures.session("s2", uid: "u1"))
        try await storage.insertSession(Fixtures.session("s3", uid: "u2"))
        try await storage.insertSession(Fixtures.session("s4", uid: "u1", expiresIn: -1))
        #expect(try await storage.sessions(uid: "u1", now: Fixtures.now).map(\.familyId) == ["family-s2", "family-s1"])
        #expect(try await storage.sessionCount(uid: "u1", now: Fixtures.now) == 2, "the expired one not counted")
        #expect(try await storage.sessionCount(uid: "nobody", now: Fixtures.now) == 0)
    }

    @Test("the listing stops at the newest 100 live sessions; the count goes on", arguments: StorageBackend.all)
    func longSessionListsStopAt100(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        for index in 0..<103 {
            var session = Fixtures.session("s\(index)", uid: "u1")
            session.createdAt = Fixtures.now.addingTimeInterval(Double(-index))
            try await storage.insertSession(session)
        }
        let listed = try await storage.sessions(uid: "u1", now: Fixtures.now)
        #expect(listed.count == 100)
        #expect(listed.first?.familyId == "family-s0" && listed.last?.familyId == "family-s99")
        #expect(try await storage.sessionCount(uid: "u1", now: Fixtures.now) == 103)
    }

    @Test(arguments: StorageBackend.all)
    func aSessionsLastUseIsReplacedAndPurgedWithIt(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.insertSession(Fixtures.session("s1", uid: "u1"))
        try await storage.insertSession(Fixtures.session("s2", uid: "u1"))
        let first = SessionUse(at: Fixtures.now, clientAddress: "203.0.113.7", userAgent: "Browser/1")
        let later = SessionUse(at: Fixtures.now.addingTimeInterval(60), clientAddress: "198.51.100.2", userAgent: nil)
        try await storage.recordSessionUse(familyId: "family-s1", first)
        try await storage.recordSessionUse(familyId: "family-s2", first)
        try await storage.recordSessionUse(familyId: "family-s1", later)
        #expect(try await storage.sessionUses(familyIds: ["family-s1", "family-s2", "family-none"]) == ["family-s1": later, "family-s2": first])
        #expect(try await storage.sessionUses(familyIds: []).isEmpty)
        // A session that ended takes its use with it at the next purge.
        try await storage.deleteSession(familyId: "family-s2")
        try await storage.purgeExpired(now: Fixtures.now)
        #expect(try await storage.sessionUses(familyIds: ["family-s1", "family-s2"]) == ["family-s1": later])
    }
}
