import Foundation
@_spi(Testing) import GatehouseCore
import GatehouseSQLite
import Logging
import Testing

/// The periodic purge of expired records, over a real store.
@Suite struct ExpiredRecordsPurgerTests {
    @Test(arguments: StorageBackend.all)
    func runningPurgerRemovesExpiredSessionsAndStopsOnCancel(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        try await storage.createAccount(Fixtures.account("u1"), firstLink: Fixtures.link("u1", federatedId: "1"))
        let clock = MovableClock(Fixtures.now)
        try await storage.insertSession(Fixtures.session("s", uid: "u1", expiresIn: 60))
        let purger = ExpiredRecordsPurger(storage: storage, interval: .milliseconds(20), logger: Logger(label: "test")) { clock.now }
        let running = Task { await purger.run() }
        defer { running.cancel() }

        // Still live: a few rounds leave it alone (read with a time before its expiry).
        try await Task.sleep(for: .milliseconds(100))
        #expect(try await storage.session(idHash: SecureRandom.digest("s"), now: Fixtures.now) != nil)

        // Past its expiry the next round deletes it, even for a reader whose clock lags.
        clock.now = Fixtures.now.addingTimeInterval(120)
        var gone = false
        for _ in 0..<250 where !gone {
            try await Task.sleep(for: .milliseconds(20))
            gone = try await storage.session(idHash: SecureRandom.digest("s"), now: Fixtures.now) == nil
        }
        #expect(gone)
        running.cancel()
        await running.value
    }

    @Test(
        "with an outbox retention a round drops the webhook events written before it and keeps the rest; without one it leaves the outbox alone",
        arguments: StorageBackend.all)
    func outboxRetention(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        // Events as a write records them: one written at `now`, one a day later.
        for (uid, eventId, age) in [("u1", "old", 0.0), ("u2", "recent", 86400.0)] {
            try await storage.createAccount(Fixtures.account(uid), firstLink: Fixtures.link(uid, federatedId: uid))
            let entry = OutboxEntry(
                eventId: eventId, endpoint: "removed", type: "account.disabled", payload: Data("{}".utf8),
                createdAt: Fixtures.now.addingTimeInterval(age))
            _ = try await Outbox.$entries.withValue([entry]) { try await storage.setDisabled(uid: uid, disabled: true) }
        }
        func waiting() async throws -> [String] {
            try await storage.outboxEntries(status: .pending, after: nil, limit: 10).map(\.eventId).sorted()
        }
        let later = Fixtures.now.addingTimeInterval(3 * 86400 + 60)
        let leaving = ExpiredRecordsPurger(storage: storage, interval: .seconds(1), logger: Logger(label: "test")) { later }
        #expect(await leaving.purgeOnce())
        #expect(try await waiting() == ["old", "recent"])
        let dropping = ExpiredRecordsPurger(storage: storage, interval: .seconds(1), outboxRetention: 3 * 86400, logger: Logger(label: "test")) {
            later
        }
        #expect(await dropping.purgeOnce())
        #expect(try await waiting() == ["recent"])
    }

    @Test func aFailingRoundIsReportedAndDoesNotThrow() async throws {
        // A database without the schema: every purge fails inside SQLite.
        let unmigrated = try SQLiteStorage(path: try StorageBackend.temporaryDatabasePath())
        let purger = ExpiredRecordsPurger(storage: unmigrated, interval: .seconds(1), logger: Logger(label: "test"))
        #expect(await purger.purgeOnce() == false)
    }
}

/// A clock the test moves by hand.
final class MovableClock: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Date
    init(_ start: Date) { value = start }
    var now: Date {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
}
