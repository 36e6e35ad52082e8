import Foundation
@_spi(Testing) import GatehouseCore
import Testing

/// The `AccountStore` part of the storage contract, run against every backend in
/// `StorageBackend.all`: accounts, links and pending credentials: creation, linking races, unlink, deletion, lookups, compare-and-set.
@Suite struct AccountStoreConformanceTests {
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
        await #expect(throws: StorageError.linkGone) { try await storage.updateLink(Fixtures.link("u2", federatedId: "1", tokens: "v1.k.hijack")) }
        let link = try #require(try await storage.link(providerId: "github.com", federatedId: "1"))
        #expect(link.uid == "u1")
        #expect(link.sealedTokens == "v1.k.sealed")
    }

    @Test(arguments: StorageBackend.all)
    func linksAreListedOldestFirst(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", provider: "oidc.z", federatedId: "z"))
        #expect(try await storage.links(uid: "u1").map(\.providerId) == ["oidc.z"])
        #expect(try await storage.links(uid: "nobody").isEmpty)
    }

    @Test(arguments: StorageBackend.all)
    func addLinkRefusesATakenIdentityOrProviderSlot(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", provider: "microsoft.com", federatedId: "m2"))
        // The identity is on u1 already.
        await #expect(throws: StorageError.conflict) { try await storage.addLink(Fixtures.link("u2", federatedId: "1")) }
        // u1 already has a GitHub identity.
        await #expect(throws: StorageError.conflict) { try await storage.addLink(Fixtures.link("u1", federatedId: "other")) }
        // An account deleted since it was read (the caller reads again and finds it gone).
        try await storage.createAccount(Fixtures.account("u3"), firstLink: Fixtures.link("u3", provider: "oidc.x", federatedId: "x3"))
        _ = try await storage.deleteAccount(uid: "u3")
        await #expect(throws: StorageError.conflict) { try await storage.addLink(Fixtures.link("u3", federatedId: "3")) }
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
    func unlinkingEndsTheSessionsThatSignedInWithItButTheSparedOne(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.addLink(Fixtures.link("u1", provider: "microsoft.com", federatedId: "m1"))
        try await storage.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", provider: "microsoft.com", federatedId: "m2"))
        func session(_ id: String, uid: String, provider: String) async throws -> SessionRecord {
            var record = Fixtures.session(id, uid: uid)
            record.signInProvider = provider
            try await storage.insertSession(record)
            return record
        }
        let byGitHub = try await session("g", uid: "u1", provider: "github.com")
        let byMicrosoft = try await session("m", uid: "u1", provider: "microsoft.com")
        let caller = try await session("c", uid: "u1", provider: "microsoft.com")
        let otherAccount = try await session("o", uid: "u2", provider: "microsoft.com")
        guard case .deleted = try await storage.deleteLink(uid: "u1", providerId: "microsoft.com", sparing: caller.familyId) else {
            Issue.record("the link was not deleted")
            return
        }
        #expect(try await storage.session(familyId: byMicrosoft.familyId, now: Fixtures.now) == nil)
        #expect(try await storage.session(familyId: caller.familyId, now: Fixtures.now) == caller, "the caller's own is spared")
        #expect(try await storage.session(familyId: byGitHub.familyId, now: Fixtures.now) == byGitHub)
        #expect(try await storage.session(familyId: otherAccount.familyId, now: Fixtures.now) == otherAccount)
        // Nothing spared (an operator's unlink): every session of that provider ends.
        try await storage.addLink(Fixtures.link("u1", provider: "microsoft.com", federatedId: "m1"))
        _ = try await storage.deleteLink(uid: "u1", providerId: "microsoft.com", sparing: nil)
        #expect(try await storage.session(familyId: caller.familyId, now: Fixtures.now) == nil)
        #expect(try await storage.session(familyId: byGitHub.familyId, now: Fixtures.now) == byGitHub)
    }

    @Test(arguments: StorageBackend.all)
    func theLastLinkCannotBeRemovedEvenByConcurrentUnlinks(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.addLink(Fixtures.link("u1", provider: "microsoft.com", federatedId: "m1"))
        #expect(try await storage.deleteLink(uid: "u1", providerId: "yahoo.com", sparing: nil) == .notLinked)
        async let first = storage.deleteLink(uid: "u1", providerId: "github.com", sparing: nil)
        async let second = storage.deleteLink(uid: "u1", providerId: "microsoft.com", sparing: nil)
        let outcomes = try await [first, second]
        let holds = outcomes.filter { if case .deleted = $0 { true } else { false } }.count == 1
        #expect(holds)
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
        try await storage.insertPendingCredential(Fixtures.pending("p1", target: "u1"))
        #expect(try await storage.deleteAccount(uid: "u1") == [link])
        #expect(try await storage.deleteAccount(uid: "u1") == nil)
        #expect(try await storage.account(uid: "u1") == nil)
        #expect(try await storage.link(providerId: "github.com", federatedId: "1") == nil)
        #expect(try await storage.session(familyId: session.familyId, now: Fixtures.now) == nil)
        #expect(try await storage.rotateRefreshToken(tokenHash: "r1", successor: .strict("r2"), now: Fixtures.now) == .unknown)
        #expect(try await storage.takePendingCredential(tokenHash: "p1", now: Fixtures.now) == nil)
    }

    @Test(arguments: StorageBackend.all)
    func aPendingCredentialIsTakenOnceBeforeItExpires(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let pending = Fixtures.pending("p1", target: "u1")
        try await storage.insertPendingCredential(pending)
        try await storage.insertPendingCredential(Fixtures.pending("p2", target: "u1", expiresIn: -1))
        #expect(try await storage.takePendingCredential(tokenHash: "p1", now: Fixtures.now) == pending)
        #expect(try await storage.takePendingCredential(tokenHash: "p1", now: Fixtures.now) == nil)
        #expect(try await storage.takePendingCredential(tokenHash: "p2", now: Fixtures.now) == nil)
    }

    @Test(arguments: StorageBackend.all)
    func aClaimReadsThePendingCredentialAndConsumesItWithTheLink(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let pending = Fixtures.pending("p1", target: "u1")
        try await storage.insertPendingCredential(pending)
        try await storage.insertPendingCredential(Fixtures.pending("p2", target: "u1", expiresIn: -1))
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
        try await storage.insertPendingCredential(Fixtures.pending("p3", target: "u1"))
        try await storage.updateLink(Fixtures.link("u1", provider: "oidc.x", federatedId: "f-p1"), consumingPending: "p3")
        #expect(try await storage.pendingCredential(tokenHash: "p3", now: Fixtures.now) == nil)
        // Consumed already (a second claim at once): nothing is written.
        var again = Fixtures.link("u1", provider: "oidc.x", federatedId: "f-p1", tokens: "v1.k.again")
        again.updatedAt = Fixtures.now.addingTimeInterval(5)
        await #expect(throws: StorageError.pendingGone) { try await storage.updateLink(again, consumingPending: "p3") }
        await #expect(throws: StorageError.pendingGone) {
            try await storage.addLink(Fixtures.link("u1", provider: "yahoo.com", federatedId: "y"), consumingPending: "p1")
        }
        #expect(try await storage.link(providerId: "oidc.x", federatedId: "f-p1")?.sealedTokens == "v1.k.sealed")
        #expect(try await storage.links(uid: "u1").count == 2)
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
        // Beyond ASCII, as the verified match compares: lower-cased and canonically composed
        // (the stored É is `E` + U+0301, the query's a precomposed é).
        var unicode = Fixtures.link("u3", federatedId: "3")
        unicode.profileJSON = Data(#"{"email":"E\#u{301}LODIE@EXÄMPLE.com"}"#.utf8)
        try await storage.createAccount(Fixtures.account("u3"), firstLink: unicode)
        #expect(try await storage.uids(email: "élodie@exämple.com", limit: 10) == ["u3"])
        #expect(try await storage.uids(email: "ÉLODIE@exämple.COM", limit: 10) == ["u3"])
        #expect(try await storage.uids(email: "elodie@example.com", limit: 10).isEmpty, "accents are kept")
        // A capital sigma at a word's end: ICU lower-cases it to ς, Swift to σ; both match.
        var greek = Fixtures.link("u4", federatedId: "4")
        greek.profileJSON = Data(#"{"email":"ΝΙΚΟΣ@ΠΑΡΑΔΕΙΓΜΑ.gr"}"#.utf8)
        try await storage.createAccount(Fixtures.account("u4"), firstLink: greek)
        for query in ["νικος@παραδειγμα.gr", "νικοσ@παραδειγμα.gr", "ΝΙΚΟΣ@ΠΑΡΑΔΕΙΓΜΑ.GR"] {
            #expect(try await storage.uids(email: query, limit: 10) == ["u4"], "\(query)")
        }
    }

    @Test(
        "a snapshot holding U+0000 (a provider passed one through) spoils neither the email lookup nor the operator search",
        arguments: StorageBackend.all)
    func snapshotWithNULDoesNotSpoilSearches(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        var hostile = Fixtures.link("u1", federatedId: "1")
        hostile.profileJSON = Data(#"{"email":"mal@example.com","displayName":"Mal","rawUserInfo":{"note":"a\u0000b"}}"#.utf8)
        try await storage.createAccount(Fixtures.account("u1"), firstLink: hostile)
        var plain = Fixtures.link("u2", federatedId: "2")
        plain.profileJSON = Data(#"{"email":"ada@example.com","displayName":"Ada Lovelace"}"#.utf8)
        try await storage.createAccount(Fixtures.account("u2"), firstLink: plain)
        #expect(try await storage.uids(email: "ada@example.com", limit: 10) == ["u2"])
        #expect(try await storage.searchAccounts(.text("lovelace"), after: nil, limit: 10) == ["u2"])
        #expect(try await storage.searchAccounts(.text("ada@example"), after: nil, limit: 10) == ["u2"])
        // The row itself is still found.
        #expect(try await storage.uids(email: "mal@example.com", limit: 10) == ["u1"])
        #expect(try await storage.searchAccounts(.text("mal"), after: nil, limit: 10) == ["u1"])
    }

    @Test(arguments: StorageBackend.all)
    func accountsAreDisabledAndEnabled(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let session = Fixtures.session("s1", uid: "u1")
        try await storage.insertSession(session)
        #expect(try await storage.setDisabled(uid: "u1", disabled: true) == .changed)
        #expect(try await storage.account(uid: "u1")?.disabled == true)
        #expect(try await storage.session(idHash: session.idHash, now: Fixtures.now) == nil, "disabling ends the sessions with it")
        #expect(try await storage.setDisabled(uid: "u1", disabled: true) == .unchanged)
        #expect(try await storage.account(uid: "u1")?.disabled == true)
        #expect(try await storage.setDisabled(uid: "u1", disabled: false) == .changed)
        #expect(try await storage.account(uid: "u1")?.disabled == false)
        #expect(try await storage.setDisabled(uid: "u1", disabled: false) == .unchanged)
        #expect(try await storage.setDisabled(uid: "nobody", disabled: true) == .notFound)
    }

    @Test(
        "a sign-in's writes to a disabled account (a returning identity, a link renewed, a link added) are accountDisabled and write nothing",
        arguments: StorageBackend.all)
    func signInWritesRefuseADisabledAccount(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.insertPendingCredential(Fixtures.pending("p1", target: "u1"))
        #expect(try await storage.setDisabled(uid: "u1", disabled: true) == .changed)
        let claims = ClaimsReplacement(stored: Data(#"{"plan":"from-hook"}"#.utf8))
        var renewed = Fixtures.link("u1", federatedId: "1", at: Fixtures.now.addingTimeInterval(60), tokens: "v1.k.renewed")
        renewed.profileJSON = Data(#"{"renewed":true}"#.utf8)
        await #expect(throws: StorageError.accountDisabled) {
            try await storage.recordSignIn(
                link: renewed, at: Fixtures.now.addingTimeInterval(60), replacingClaims: claims, exclusiveEmail: true, keepingTokens: false)
        }
        await #expect(throws: StorageError.accountDisabled) {
            try await storage.updateLink(renewed, consumingPending: "p1", replacingClaims: claims, exclusiveEmail: true, keepingTokens: false)
        }
        await #expect(throws: StorageError.accountDisabled) {
            try await storage.addLink(
                Fixtures.link("u1", provider: "oidc.x", federatedId: "2"), consumingPending: nil, replacingClaims: nil, exclusiveEmail: false)
        }
        let account = try #require(try await storage.account(uid: "u1"))
        #expect(account.customClaims == nil && account.lastSignInAt == Fixtures.now)
        #expect(try await storage.links(uid: "u1").map(\.sealedTokens) == ["v1.k.sealed"])
        #expect(try await storage.pendingCredential(tokenHash: "p1", now: Fixtures.now) != nil)
        // Enabled again, the same writes go through.
        #expect(try await storage.setDisabled(uid: "u1", disabled: false) == .changed)
        try await storage.recordSignIn(
            link: renewed, at: Fixtures.now.addingTimeInterval(60), replacingClaims: claims, exclusiveEmail: true, keepingTokens: false)
        try await storage.addLink(
            Fixtures.link("u1", provider: "oidc.x", federatedId: "2"), consumingPending: "p1", replacingClaims: nil, exclusiveEmail: false)
        #expect(try await storage.links(uid: "u1").map(\.sealedTokens) == ["v1.k.renewed", "v1.k.sealed"])
    }

    @Test("a flag set to the value it has records none of the write's webhook events", arguments: StorageBackend.all)
    func unchangedFlagRecordsNoEvent(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        func disable(_ eventId: String) async throws -> FlagChange {
            let entry = OutboxEntry(eventId: eventId, endpoint: "app", type: "account.disabled", payload: Data("{}".utf8), createdAt: Fixtures.now)
            return try await Outbox.$entries.withValue([entry]) { try await storage.setDisabled(uid: "u1", disabled: true) }
        }
        #expect(try await disable("e1") == .changed)
        #expect(try await disable("e2") == .unchanged)
        #expect(try await storage.outboxEntries(status: .pending, after: nil, limit: 10).map(\.eventId) == ["e1"])
    }

    @Test(
        "ending every session of an account says whether a live one ended, and records the write's webhook events only then; expired ones go too, and count for nothing",
        arguments: StorageBackend.all)
    func endingNoSessionRecordsNoEvent(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.insertSession(Fixtures.session("s1", uid: "u1"))
        try await storage.insertSession(Fixtures.session("s2", uid: "u1"))
        var expired = Fixtures.session("s3", uid: "u2")
        try await storage.createAccount(Fixtures.account("u2"), firstLink: Fixtures.link("u2", federatedId: "2"))
        expired.expiresAt = Fixtures.now.addingTimeInterval(-1)
        try await storage.insertSession(expired)
        #expect(try await !storage.deleteSessions(uid: "u2", now: Fixtures.now), "only an expired session ended")
        func revoke(_ eventId: String) async throws -> Bool {
            let entry = OutboxEntry(
                eventId: eventId, endpoint: "app", type: "account.sessions-revoked", payload: Data("{}".utf8), createdAt: Fixtures.now)
            return try await Outbox.$entries.withValue([entry]) { try await storage.deleteSessions(uid: "u1", now: Fixtures.now) }
        }
        #expect(try await revoke("e1"))
        #expect(try await storage.sessionCount(uid: "u1", now: Fixtures.now) == 0)
        #expect(try await !revoke("e2"))
        #expect(try await storage.outboxEntries(status: .pending, after: nil, limit: 10).map(\.eventId) == ["e1"])
    }

    @Test("the outbox lists deliveries oldest first, page by page: event ids sort by the time of their change", arguments: StorageBackend.all)
    func outboxListsOldestFirst(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        var written: [String] = []
        for index in 0..<12 {
            // A millisecond apart and more: the order a random id would give by chance is one in 12!.
            let event = WebhookEvent.account(.accountDisabled, uid: "u1", at: Fixtures.now.addingTimeInterval(Double(index) * 0.0015))
            let entry = OutboxEntry(
                eventId: event.id, endpoint: "app", type: event.type.rawValue, payload: Data("{}".utf8), createdAt: event.timestamp)
            _ = try await Outbox.$entries.withValue([entry]) { try await storage.setDisabled(uid: "u1", disabled: index % 2 == 0) }
            written.append(event.id)
        }
        var listed: [String] = []
        var cursor: String?
        for _ in 0..<5 {
            let page = try await storage.outboxEntries(status: .pending, after: cursor, limit: 5)
            listed += page.map(\.eventId)
            guard page.count == 5 else { break }
            cursor = page.last?.id
        }
        #expect(listed == written)
    }

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
        await #expect(throws: StorageError.linkGone) {
            try await storage.updateLinkProfile(
                providerId: "github.com", federatedId: "42", uid: "someone-else", profileJSON: Data("{}".utf8), verifiedEmail: nil, at: Fixtures.now)
        }
        let link = try #require(try await storage.link(providerId: "github.com", federatedId: "42"))
        #expect(link.sealedTokens == "v1.new.z")
        #expect(link.profileJSON == Data(#"{"federatedId":"42","email":"a@b.example"}"#.utf8))
        #expect(link.updatedAt == Fixtures.now.addingTimeInterval(5))
        #expect(link.verifiedEmail == "a@b.example")
        #expect(try await storage.uids(verifiedEmail: "a@b.example", limit: 5) == ["u1"])
    }

    @Test(
        "a write to a link that is gone (unlinked meanwhile) throws linkGone and commits nothing of its transaction, its events included",
        arguments: StorageBackend.all)
    func writesToAGoneLinkCommitNothing(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        try await storage.addLink(Fixtures.link("u1", provider: "oidc.x", federatedId: "2"), consumingPending: nil, replacingClaims: nil)
        guard case .deleted = try await storage.deleteLink(uid: "u1", providerId: "oidc.x", sparing: nil) else {
            Issue.record("the link was not deleted")
            return
        }
        try await storage.insertPendingCredential(Fixtures.pending("p1", target: "u1"))
        let gone = Fixtures.link("u1", provider: "oidc.x", federatedId: "2", at: Fixtures.now.addingTimeInterval(60), tokens: "v1.k.later")
        let claims = ClaimsReplacement(stored: Data(#"{"role":"admin"}"#.utf8))
        func recorded(_ eventId: String, _ write: () async throws -> Void) async throws {
            let entry = OutboxEntry(eventId: eventId, endpoint: "app", type: "account.updated", payload: Data("{}".utf8), createdAt: Fixtures.now)
            try await Outbox.$entries.withValue([entry]) { try await write() }
        }
        await #expect(throws: StorageError.linkGone) {
            try await recorded("e1") { try await storage.recordSignIn(link: gone, at: Fixtures.now.addingTimeInterval(60), replacingClaims: claims) }
        }
        await #expect(throws: StorageError.linkGone) {
            try await recorded("e2") { try await storage.updateLink(gone, consumingPending: "p1", replacingClaims: claims) }
        }
        await #expect(throws: StorageError.linkGone) { try await recorded("e3") { try await storage.updateLink(gone) } }
        await #expect(throws: StorageError.linkGone) {
            try await recorded("e4") {
                try await storage.updateLinkProfile(
                    providerId: "oidc.x", federatedId: "2", uid: "u1", profileJSON: Data("{}".utf8), verifiedEmail: "a@b.example", at: Fixtures.now)
            }
        }
        let account = try #require(try await storage.account(uid: "u1"))
        #expect(account.customClaims == nil)
        #expect(account.lastSignInAt == Fixtures.now)
        #expect(try await storage.link(providerId: "oidc.x", federatedId: "2") == nil)
        #expect(try await storage.pendingCredential(tokenHash: "p1", now: Fixtures.now) != nil)
        #expect(try await storage.outboxEntries(status: .pending, after: nil, limit: 10).isEmpty)
    }

    /// A link of `uid` to `provider` whose verified email is `email`.
    static func link(_ uid: String, provider: String = "github.com", federatedId: String, email: String) -> ProviderLinkRecord {
        var link = Fixtures.link(uid, provider: provider, federatedId: federatedId)
        link.verifiedEmail = email
        return link
    }

    /// Runs `write(0)` … `write(7)` at once: how many were written, the others refused with
    /// `refusal` (any other error fails the test).
    static func eightAtOnce(refusedWith refusal: StorageError, _ write: @escaping @Sendable (Int) async throws -> Void) async throws -> Int {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask {
                    do {
                        try await write(index)
                        return true
                    } catch let error as StorageError where error == refusal {
                        return false
                    }
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
    }

    /// A store where account `u1` holds `sam@example.com` verified.
    static func storeWithSam(_ backend: StorageBackend) async throws -> any GatehouseStorage {
        let storage = try await backend.make()
        try await storage.createAccount(
            Fixtures.account("u1"), firstLink: Self.link("u1", federatedId: "1", email: "sam@example.com"), exclusiveEmail: true)
        return storage
    }

    @Test(
        "asked to keep verified emails exclusive, creating an account or adding a link with an address another account holds is a conflict, decided in the write's transaction: of eight accounts created at once with one address, one is written",
        arguments: StorageBackend.all)
    func exclusiveEmailIsDecidedInTheWrite(_ backend: StorageBackend) async throws {
        let storage = try await Self.storeWithSam(backend)
        await #expect(throws: StorageError.conflict) {
            try await storage.createAccount(
                Fixtures.account("u2"), firstLink: Self.link("u2", provider: "oidc.example", federatedId: "2", email: "sam@example.com"),
                exclusiveEmail: true)
        }
        #expect(try await storage.account(uid: "u2") == nil, "nothing of the account was written")
        // The account's own address, on another of its links, is no conflict.
        try await storage.addLink(
            Self.link("u1", provider: "oidc.example", federatedId: "1", email: "sam@example.com"), consumingPending: nil, replacingClaims: nil,
            exclusiveEmail: true)
        try await storage.createAccount(Fixtures.account("u3"), firstLink: Fixtures.link("u3", federatedId: "3"), exclusiveEmail: true)
        await #expect(throws: StorageError.conflict) {
            try await storage.addLink(
                Self.link("u3", provider: "yahoo.com", federatedId: "3", email: "sam@example.com"), consumingPending: nil, replacingClaims: nil,
                exclusiveEmail: true)
        }
        #expect(try await storage.links(uid: "u3").count == 1)
        // Without the rule (GATEHOUSE_ONE_ACCOUNT_PER_EMAIL=false), both write.
        try await storage.createAccount(
            Fixtures.account("u4"), firstLink: Self.link("u4", provider: "oidc.example", federatedId: "4", email: "sam@example.com"))
        try await storage.addLink(Self.link("u3", provider: "yahoo.com", federatedId: "3", email: "sam@example.com"))
        #expect(try await storage.uids(verifiedEmail: "sam@example.com", limit: 10).sorted() == ["u1", "u3", "u4"])

        let written = try await Self.eightAtOnce(refusedWith: .conflict) { index in
            try await storage.createAccount(
                Fixtures.account("r\(index)"), firstLink: Self.link("r\(index)", federatedId: "r\(index)", email: "race@example.com"),
                exclusiveEmail: true)
        }
        #expect(written == 1)
        #expect(try await storage.uids(verifiedEmail: "race@example.com", limit: 10).count == 1)
    }

    @Test(
        "a sign-in or a link's update keeping its tokens writes the profile and leaves the stored tokens, with the email rule on or off, for an address held or new",
        arguments: StorageBackend.all)
    func keepingTokens(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1", tokens: "v1.refreshed.x"))
        @Sendable func stored() async throws -> ProviderLinkRecord? { try await storage.link(providerId: "github.com", federatedId: "1") }
        for (index, (exclusive, email)) in [(false, "a@example.com"), (true, "a@example.com"), (true, "b@example.com")].enumerated() {
            // Read before the refresh: its tokens are the ones an ID-token sign-in must not write back.
            var read = Self.link("u1", federatedId: "1", email: email)
            read.sealedTokens = "v1.read.y"
            read.profileJSON = Data(#"{"federatedId":"1","displayName":"Version \#(index)"}"#.utf8)
            read.updatedAt = Fixtures.now.addingTimeInterval(Double(index + 1))
            if index % 2 == 0 {
                try await storage.recordSignIn(link: read, at: read.updatedAt, replacingClaims: nil, exclusiveEmail: exclusive, keepingTokens: true)
                #expect(try await storage.account(uid: "u1")?.lastSignInAt == read.updatedAt)
            } else {
                try await storage.insertPendingCredential(Fixtures.pending("p\(index)", target: "u1"))
                try await storage.updateLink(
                    read, consumingPending: "p\(index)", replacingClaims: nil, exclusiveEmail: exclusive, keepingTokens: true)
                #expect(try await storage.pendingCredential(tokenHash: "p\(index)", now: Fixtures.now) == nil, "consumed")
            }
            let link = try #require(try await stored())
            #expect(link.sealedTokens == "v1.refreshed.x", "\(index)")
            #expect(link.profileJSON == read.profileJSON)
            #expect(link.verifiedEmail == email)
            #expect(link.updatedAt == read.updatedAt)
        }
        // Without keepingTokens, the tokens are replaced.
        var replacing = Self.link("u1", federatedId: "1", email: "b@example.com")
        replacing.sealedTokens = "v1.new.z"
        try await storage.recordSignIn(link: replacing, at: Fixtures.now, replacingClaims: nil, exclusiveEmail: true, keepingTokens: false)
        #expect(try await stored()?.sealedTokens == "v1.new.z")
        await #expect(throws: StorageError.linkGone) {
            var gone = replacing
            gone.uid = "someone-else"
            try await storage.recordSignIn(link: gone, at: Fixtures.now, replacingClaims: nil, exclusiveEmail: false, keepingTokens: true)
        }
    }

    @Test(
        "asked to keep verified emails exclusive, a sign-in, a link's update or a live profile writing an address another account holds is changedMeanwhile and writes nothing; the account's own address is written",
        arguments: StorageBackend.all)
    func exclusiveEmailOnUpdates(_ backend: StorageBackend) async throws {
        let storage = try await Self.storeWithSam(backend)
        try await storage.createAccount(Fixtures.account("u3"), firstLink: Fixtures.link("u3", federatedId: "3"), exclusiveEmail: true)
        let taking = Self.link("u3", federatedId: "3", email: "sam@example.com")
        await #expect(throws: StorageError.changedMeanwhile) {
            try await storage.recordSignIn(link: taking, at: Fixtures.now, replacingClaims: nil, exclusiveEmail: true, keepingTokens: false)
        }
        await #expect(throws: StorageError.changedMeanwhile) {
            try await storage.updateLink(taking, consumingPending: nil, replacingClaims: nil, exclusiveEmail: true, keepingTokens: false)
        }
        await #expect(throws: StorageError.changedMeanwhile) {
            try await storage.updateLinkProfile(
                providerId: "github.com", federatedId: "3", uid: "u3", profileJSON: taking.profileJSON, verifiedEmail: "sam@example.com",
                at: Fixtures.now, exclusiveEmail: true)
        }
        #expect(try await storage.link(providerId: "github.com", federatedId: "3")?.verifiedEmail == nil, "nothing was written")
        // The account's own address.
        try await storage.recordSignIn(
            link: Self.link("u1", federatedId: "1", email: "sam@example.com"), at: Fixtures.now, replacingClaims: nil, exclusiveEmail: true,
            keepingTokens: false)
        try await storage.updateLinkProfile(
            providerId: "github.com", federatedId: "1", uid: "u1", profileJSON: taking.profileJSON, verifiedEmail: "sam@example.com",
            at: Fixtures.now, exclusiveEmail: true)
        // Without the rule, written.
        try await storage.recordSignIn(link: taking, at: Fixtures.now)
        #expect(try await storage.uids(verifiedEmail: "sam@example.com", limit: 10).sorted() == ["u1", "u3"])
        // A link that holds the address already keeps it, shared or not: it was decided when written.
        try await storage.recordSignIn(link: taking, at: Fixtures.now, replacingClaims: nil, exclusiveEmail: true, keepingTokens: false)
        try await storage.updateLinkProfile(
            providerId: "github.com", federatedId: "3", uid: "u3", profileJSON: taking.profileJSON, verifiedEmail: "sam@example.com",
            at: Fixtures.now, exclusiveEmail: true)
        // Once it no longer holds it, writing it again is checked.
        try await storage.updateLinkProfile(
            providerId: "github.com", federatedId: "3", uid: "u3", profileJSON: taking.profileJSON, verifiedEmail: nil, at: Fixtures.now,
            exclusiveEmail: true)
        await #expect(throws: StorageError.changedMeanwhile) {
            try await storage.updateLink(taking, consumingPending: nil, replacingClaims: nil, exclusiveEmail: true, keepingTokens: false)
        }

        // Eight accounts' sign-ins recording one new address at once: one is written.
        for index in 0..<8 {
            try await storage.createAccount(Fixtures.account("r\(index)"), firstLink: Fixtures.link("r\(index)", federatedId: "r\(index)"))
        }
        let written = try await Self.eightAtOnce(refusedWith: .changedMeanwhile) { index in
            try await storage.recordSignIn(
                link: Self.link("r\(index)", federatedId: "r\(index)", email: "race@example.com"), at: Fixtures.now, replacingClaims: nil,
                exclusiveEmail: true, keepingTokens: false)
        }
        #expect(written == 1)
        #expect(try await storage.uids(verifiedEmail: "race@example.com", limit: 10).count == 1)
    }
}
