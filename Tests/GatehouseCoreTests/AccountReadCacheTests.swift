import Foundation
import Testing

@testable import GatehouseCore

/// The in-memory accounts, links and sessions behind `CachedStore` (issue #18).
@Suite struct AccountReadCacheTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func session(_ id: String, uid: String, expiresIn: TimeInterval = 3600) -> SessionRecord {
        SessionRecord(idHash: "hash-\(id)", uid: uid, createdAt: now, expiresAt: now.addingTimeInterval(expiresIn), familyId: "family-\(id)")
    }

    @Test("a session is found by cookie hash and by family; an invalidation by either key, or by its account, drops the whole account")
    func lookupsAndInvalidation() {
        let cache = AccountReadCache(capacity: 100, lifetime: 60, enabled: true)
        for invalidate in [
            { (cache: AccountReadCache) in cache.invalidate(uid: "u1") }, { $0.invalidate(sessionHash: "hash-s1") },
            { $0.invalidate(familyId: "family-s1") }, { $0.invalidate(providerId: "github.com", federatedId: "f1") },
        ] {
            let ticket = cache.ticket()
            cache.store(Self.session("s1", uid: "u1"), ticket: ticket, now: Self.now)
            cache.store(AccountRecord(uid: "u1", createdAt: Self.now, lastSignInAt: Self.now), ticket: ticket, now: Self.now)
            cache.store(
                links: [
                    ProviderLinkRecord(
                        uid: "u1", providerId: "github.com", federatedId: "f1", profileJSON: Data(), sealedTokens: "", linkedAt: Self.now,
                        updatedAt: Self.now)
                ], uid: "u1", ticket: ticket, now: Self.now)
            #expect(cache.session(idHash: "hash-s1", now: Self.now)?.familyId == "family-s1")
            #expect(cache.session(familyId: "family-s1", now: Self.now)?.idHash == "hash-s1")
            #expect(cache.account(uid: "u1", now: Self.now)?.uid == "u1")
            #expect(cache.links(uid: "u1", now: Self.now)?.count == 1)
            invalidate(cache)
            #expect(cache.session(idHash: "hash-s1", now: Self.now) == nil)
            #expect(cache.session(familyId: "family-s1", now: Self.now) == nil)
            #expect(cache.account(uid: "u1", now: Self.now) == nil)
            #expect(cache.links(uid: "u1", now: Self.now) == nil)
            #expect(cache.count == 0)
        }
    }

    @Test("a read that began before an invalidation is not stored after it (its answer may predate the write)")
    func readsAcrossAnInvalidationAreDropped() {
        let cache = AccountReadCache(capacity: 100, lifetime: 60, enabled: true)
        let ticket = cache.ticket()
        cache.invalidate(uid: "someone-else")
        cache.store(Self.session("s1", uid: "u1"), ticket: ticket, now: Self.now)
        #expect(cache.session(idHash: "hash-s1", now: Self.now) == nil)
        cache.store(Self.session("s1", uid: "u1"), ticket: cache.ticket(), now: Self.now)
        #expect(cache.session(idHash: "hash-s1", now: Self.now) != nil)
    }

    @Test("nothing older than the lifetime is answered; at most `capacity` accounts and 16 sessions each are held")
    func bounded() {
        let cache = AccountReadCache(capacity: 10, lifetime: 60, enabled: true)
        cache.store(Self.session("old", uid: "u0"), ticket: cache.ticket(), now: Self.now)
        #expect(cache.session(idHash: "hash-old", now: Self.now.addingTimeInterval(59)) != nil)
        #expect(cache.session(idHash: "hash-old", now: Self.now.addingTimeInterval(60)) == nil)
        for index in 0..<1000 { cache.store(Self.session("s\(index)", uid: "u\(index)"), ticket: cache.ticket(), now: Self.now) }
        #expect(cache.count <= 10)
        #expect(cache.session(idHash: "hash-s999", now: Self.now) != nil)
        for index in 0..<40 { cache.store(Self.session("many\(index)", uid: "busy"), ticket: cache.ticket(), now: Self.now) }
        #expect(cache.session(idHash: "hash-many39", now: Self.now) != nil)
        #expect(cache.session(idHash: "hash-many0", now: Self.now) == nil)
    }

    @Test("off (a shared store whose change feed is not listening, or a zero lifetime): nothing is stored or answered")
    func off() {
        for cache in [AccountReadCache(capacity: 10, lifetime: 60, enabled: false), AccountReadCache(capacity: 10, lifetime: 0, enabled: true)] {
            cache.store(Self.session("s1", uid: "u1"), ticket: cache.ticket(), now: Self.now)
            #expect(cache.session(idHash: "hash-s1", now: Self.now) == nil)
        }
        let cache = AccountReadCache(capacity: 10, lifetime: 60, enabled: true)
        cache.store(Self.session("s1", uid: "u1"), ticket: cache.ticket(), now: Self.now)
        cache.invalidateAll(enabled: false)
        #expect(cache.session(idHash: "hash-s1", now: Self.now) == nil)
        cache.store(Self.session("s1", uid: "u1"), ticket: cache.ticket(), now: Self.now)
        #expect(cache.count == 0)
    }

    @Test(
        "an account with more sessions than are held keeps no lookup key of an evicted session: 1,000 sessions of one account leave 16 sessions' keys"
    )
    func evictedSessionsLeaveNoLookupKeys() {
        let cache = AccountReadCache(capacity: 10, lifetime: 60, enabled: true)
        for index in 0..<1000 { cache.store(Self.session("s\(index)", uid: "u1"), ticket: cache.ticket(), now: Self.now) }
        #expect(cache.lookupKeys == 2 * 16)
        #expect(cache.session(idHash: "hash-s0", now: Self.now) == nil)
        #expect(cache.session(familyId: "family-s999", now: Self.now) != nil)
        // Links replaced many times, and accounts passing through both generations.
        for index in 0..<100 {
            let link = ProviderLinkRecord(
                uid: "u1", providerId: "github.com", federatedId: "f\(index)", profileJSON: Data(), sealedTokens: "", linkedAt: Self.now,
                updatedAt: Self.now)
            cache.store(links: [link], uid: "u1", ticket: cache.ticket(), now: Self.now)
            cache.store(Self.session("other\(index)", uid: "u\(index + 2)"), ticket: cache.ticket(), now: Self.now)
        }
        #expect(cache.lookupKeys <= 2 * 16 + 1 + 2 * 10, "\(cache.lookupKeys)")
    }

    static func link(uid: String, profileBytes: Int) -> ProviderLinkRecord {
        ProviderLinkRecord(
            uid: uid, providerId: "oidc.example", federatedId: "f-\(uid)", profileJSON: Data(repeating: 0x20, count: profileBytes),
            sealedTokens: "", linkedAt: now, updatedAt: now)
    }

    @Test(
        "held accounts are weighed in bytes: accounts whose providers answered megabyte profiles fill the 32 MiB budget, not ten thousand slots"
    )
    func weighedInBytes() {
        let cache = AccountReadCache(capacity: 10_000, lifetime: 60, enabled: true)
        for index in 0..<200 {
            cache.store(links: [Self.link(uid: "u\(index)", profileBytes: 1 << 20)], uid: "u\(index)", ticket: cache.ticket(), now: Self.now)
        }
        #expect(cache.count <= 32, "\(cache.count) accounts of a megabyte each held")
        #expect(cache.bytes <= 32 << 20 && cache.bytes > 15 << 20, "\(cache.bytes)")
        #expect(cache.links(uid: "u199", now: Self.now)?.first?.profileJSON.count == 1 << 20)
        // An account heavier than a generation is not held; what was held before stays.
        cache.store(links: [Self.link(uid: "huge", profileBytes: 17 << 20)], uid: "huge", ticket: cache.ticket(), now: Self.now)
        #expect(cache.links(uid: "huge", now: Self.now) == nil)
        #expect(cache.links(uid: "u199", now: Self.now) != nil)
        // Replacing an account's links re-weighs it; dropping it takes its weight away.
        let before = cache.bytes
        cache.store(links: [Self.link(uid: "u199", profileBytes: 10)], uid: "u199", ticket: cache.ticket(), now: Self.now)
        #expect(before - cache.bytes == (1 << 20) - 10)
        cache.invalidate(uid: "u199")
        #expect(before - cache.bytes > 1 << 20 - 10 + AccountReadCache.recordBytes)
        // Small accounts still fill the slots.
        for index in 0..<10_000 { cache.store(Self.session("s\(index)", uid: "small\(index)"), ticket: cache.ticket(), now: Self.now) }
        #expect(cache.count >= 5_000, "\(cache.count)")
    }
}
