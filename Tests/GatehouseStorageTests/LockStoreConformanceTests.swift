import Foundation
import GatehouseCore
import Synchronization
import Testing

/// The store's named locks (one provider-token refresh at a time across instances).
@Suite struct LockStoreConformanceTests {
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
        let holds = try await storage.withLock("refresh|c") { 42 } == 42
        #expect(holds)
    }

    @Test(
        "a waiter gives up after the store's lock wait (unavailable) and at once when cancelled; the holder keeps the lock, and the next live waiter gets it",
        arguments: StorageBackend.all)
    func waitersGiveUp(_ backend: StorageBackend) async throws {
        let hasty = try await backend.makeWaiting(.milliseconds(300))
        let held = try await Self.hold(hasty, "refresh|held")
        let timedOut = Task { try await hasty.withLock("refresh|held") { "taken from its holder" } }
        let timedOutOutcome = try #require(await Self.outcome(of: timedOut, within: .seconds(20)), "the waiter never gave up")
        #expect(throws: StorageError.unavailable) { try timedOutOutcome.get() }
        // The waiter that gave up took nothing from the holder: the next one waits, and gives up, too.
        let next = Task { try await hasty.withLock("refresh|held") { "taken from its holder" } }
        let nextOutcome = try #require(await Self.outcome(of: next, within: .seconds(20)), "the next waiter never gave up")
        #expect(throws: StorageError.unavailable) { try nextOutcome.get() }
        held.release()
        try await held.done.value
        let free = try await hasty.withLock("refresh|held") { 42 }
        #expect(free == 42)

        let patient = try await backend.makeWaiting(.seconds(60))
        let holder = try await Self.hold(patient, "refresh|held")
        let cancelled = Task { try await patient.withLock("refresh|held") { "taken from its holder" } }
        try await Task.sleep(for: .milliseconds(100))  // queued by now, on any machine: it gives up the same way before
        let live = Task { try await patient.withLock("refresh|held") { "the next waiter's" } }
        cancelled.cancel()
        let cancelledOutcome = try #require(await Self.outcome(of: cancelled, within: .seconds(20)), "the cancelled waiter still waits")
        #expect(throws: (any Error).self) { try cancelledOutcome.get() }
        holder.release()
        try await holder.done.value
        let liveOutcome = try #require(await Self.outcome(of: live, within: .seconds(20)), "the live waiter never got the lock")
        #expect(try liveOutcome.get() == "the next waiter's")
    }

    /// Holds `name` of `storage` in a task of its own until `release` is called; returns once
    /// the holder is inside.
    static func hold(_ storage: any GatehouseStorage, _ name: String) async throws -> (release: @Sendable () -> Void, done: Task<Void, any Error>) {
        let (entered, inside) = AsyncStream<Void>.makeStream()
        let (released, release) = AsyncStream<Void>.makeStream()
        let done = Task {
            try await storage.withLock(name) {
                inside.yield()
                for await _ in released { break }
            }
        }
        for await _ in entered { break }
        return ({ release.yield() }, done)
    }

    /// `task`'s outcome, or `nil` when it has not ended within `limit` (a waiter that never gives
    /// up fails the test instead of hanging it).
    static func outcome<T: Sendable>(of task: Task<T, any Error>, within limit: Duration) async -> Result<T, any Error>? {
        let once = Once()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, any Error>?, Never>) in
            let finish: @Sendable (Result<T, any Error>?) -> Void = { outcome in
                if once.first() { continuation.resume(returning: outcome) }
            }
            Task { finish(await task.result) }
            Task {
                try? await Task.sleep(for: limit)
                finish(nil)
            }
        }
    }
}

/// Says `true` the first time only, from any thread.
private final class Once: Sendable {
    private let done = Mutex(false)

    /// `true` the first time it is asked, `false` after.
    func first() -> Bool {
        done.withLock { done in
            defer { done = true }
            return !done
        }
    }
}
