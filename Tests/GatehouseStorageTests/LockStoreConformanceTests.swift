import Foundation
import GatehouseCore
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
}
