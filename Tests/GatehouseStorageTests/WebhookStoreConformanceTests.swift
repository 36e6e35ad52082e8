import Foundation
@_spi(Testing) import GatehouseCore
import Testing

/// The `WebhookStore` part of the storage contract, run against every backend in
/// `StorageBackend.all`: entries claimed under a lease and completed by whoever holds it.
@Suite struct WebhookStoreConformanceTests {
    /// A store holding one pending entry for endpoint `app`, recorded with an account's change.
    static func storeWithOneEntry(_ backend: StorageBackend) async throws -> (any GatehouseStorage, OutboxEntry) {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let entry = OutboxEntry(eventId: "e1", endpoint: "app", type: "account.disabled", payload: Data("{}".utf8), createdAt: Fixtures.now)
        _ = try await Outbox.$entries.withValue([entry]) { try await storage.setDisabled(uid: "u1", disabled: true) }
        return (storage, entry)
    }

    @Test(arguments: StorageBackend.all)
    func onlyTheLeaseHolderRecordsAnOutcome(_ backend: StorageBackend) async throws {
        let (storage, entry) = try await Self.storeWithOneEntry(backend)
        let at = Fixtures.now
        // The first holder's lease runs out (its store write was slow; here at once, on every
        // store's clock): another instance claims.
        let firstLease = OutboxLease(duration: 0)
        #expect(try await storage.claimOutbox(endpoint: "app", now: at, lease: firstLease, limit: 8).map(\.id) == [entry.id])
        let secondLease = OutboxLease(duration: 3600)
        let again = try await storage.claimOutbox(endpoint: "app", now: at.addingTimeInterval(16), lease: secondLease, limit: 8)
        #expect(again.map(\.id) == [entry.id])
        // The first holder's outcomes arrive late: none is recorded, the second lease holds.
        try await storage.completeOutbox(id: entry.id, lease: firstLease, outcome: .retry(at: at.addingTimeInterval(100), status: 503, error: "late"))
        try await storage.completeOutbox(id: entry.id, lease: firstLease, outcome: .failed(status: 500, error: "late"))
        try await storage.completeOutbox(id: entry.id, lease: firstLease, outcome: .postponed(until: at.addingTimeInterval(100), error: "late"))
        var listed = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
        #expect(listed.map(\.attempts) == [0] && listed.map(\.lastError) == [nil], "\(listed)")
        #expect(
            try await storage.claimOutbox(endpoint: "app", now: at.addingTimeInterval(20), lease: OutboxLease(duration: 3600), limit: 8).isEmpty)
        // The holder's outcome is recorded.
        try await storage.completeOutbox(id: entry.id, lease: secondLease, outcome: .retry(at: at.addingTimeInterval(50), status: 502, error: "held"))
        listed = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
        #expect(listed.map(\.attempts) == [1] && listed.map(\.lastError) == ["held"], "\(listed)")
        // A delivery is recorded whoever made it: the receiver has the event.
        let third = try await storage.claimOutbox(endpoint: "app", now: at.addingTimeInterval(50), lease: OutboxLease(duration: 3600), limit: 8)
        #expect(third.map(\.id) == [entry.id])
        try await storage.completeOutbox(id: entry.id, lease: secondLease, outcome: .delivered)
        #expect(try await storage.outboxEntries(status: .pending, after: nil, limit: 10).isEmpty)
    }

    @Test(arguments: StorageBackend.all)
    func aRedeliveryEndsTheClaimsHold(_ backend: StorageBackend) async throws {
        let (storage, entry) = try await Self.storeWithOneEntry(backend)
        let at = Fixtures.now
        // The claim's lease ran out (here at once): an operator redelivers the entry.
        let lapsed = OutboxLease(duration: 0)
        #expect(try await storage.claimOutbox(endpoint: "app", now: at, lease: lapsed, limit: 8).map(\.id) == [entry.id])
        #expect(try await storage.redeliverOutbox(id: entry.id, now: at.addingTimeInterval(1)))
        // The claim's late outcome is not recorded: the redelivery stands.
        try await storage.completeOutbox(id: entry.id, lease: lapsed, outcome: .failed(status: 500, error: "late"))
        let listed = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
        #expect(listed.map(\.attempts) == [0] && listed.map(\.lastError) == [nil], "\(listed)")
    }

    @Test(arguments: StorageBackend.all)
    func aRedeliveredFailureStartsItsRetriesAnewAPendingOneKeepsThem(_ backend: StorageBackend) async throws {
        let (storage, entry) = try await Self.storeWithOneEntry(backend)
        let at = Fixtures.now
        func attempt(_ outcome: DeliveryOutcome, at offset: TimeInterval) async throws {
            let lease = OutboxLease(duration: 3600)
            let claimed = try await storage.claimOutbox(endpoint: "app", now: at.addingTimeInterval(offset), lease: lease, limit: 8)
            #expect(claimed.map(\.id) == [entry.id])
            try await storage.completeOutbox(id: entry.id, lease: lease, outcome: outcome)
        }
        try await attempt(.retry(at: at.addingTimeInterval(10), status: 503, error: "down"), at: 0)
        // Pending: redelivered now, its attempts kept.
        #expect(try await storage.redeliverOutbox(id: entry.id, now: at.addingTimeInterval(1)))
        var pending = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
        #expect(pending.map(\.attempts) == [1])
        try await attempt(.failed(status: 503, error: "down"), at: 1)
        #expect(try await storage.outboxEntries(status: .failed, after: nil, limit: 10).map(\.id) == [entry.id])
        // Failed: redelivered, its retries start anew.
        #expect(try await storage.redeliverOutbox(id: entry.id, now: at.addingTimeInterval(2)))
        pending = try await storage.outboxEntries(status: .pending, after: nil, limit: 10)
        #expect(pending.map(\.attempts) == [0], "\(pending)")
        #expect(
            try await storage.claimOutbox(endpoint: "app", now: at.addingTimeInterval(2), lease: OutboxLease(duration: 3600), limit: 8).count == 1)
    }

    @Test(arguments: StorageBackend.all)
    func dropsOldEntriesNoDeliveryHolds(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        func entry(_ id: String, _ endpoint: String, age: TimeInterval) -> OutboxEntry {
            OutboxEntry(
                eventId: id, endpoint: endpoint, type: "account.disabled", payload: Data("{}".utf8), createdAt: Fixtures.now.addingTimeInterval(-age))
        }
        let entries = [entry("e1", "app", age: 100), entry("e2", "app", age: 50), entry("e3", "other", age: 60), entry("e4", "app", age: 0)]
        _ = try await Outbox.$entries.withValue(entries) { try await storage.setDisabled(uid: "u1", disabled: true) }
        // The oldest is being delivered: its lease runs past now.
        let leased = try await storage.claimOutbox(endpoint: "app", now: Fixtures.now, lease: OutboxLease(duration: 3600), limit: 1)
        #expect(leased.map(\.eventId) == ["e1"])
        #expect(try await storage.dropOutbox(writtenBefore: Fixtures.now.addingTimeInterval(-10), now: Fixtures.now) == ["app": 1, "other": 1])
        let left = try await storage.outboxEntries(status: .pending, after: nil, limit: 10).map(\.eventId).sorted()
        #expect(left == ["e1", "e4"])
    }
}
