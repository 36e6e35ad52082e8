import Foundation
import Testing

@testable import GatehouseCore

/// The bounded, expiring, single-flight cache behind profiles and photos.
@Suite struct ExpiringCacheTests {
    /// Counts loads per key.
    actor Loads {
        var counts: [String: Int] = [:]
        func add(_ key: String) { counts[key, default: 0] += 1 }
    }

    @Test func hitsAreReusedAndTheLeastRecentlyUsedGoesFirst() async throws {
        let loads = Loads()
        let cache = ExpiringCache<[UInt8]>(lifetime: 60, capacity: 100) { $0.count }
        func get(_ key: String, bytes: Int = 40) async throws -> [UInt8] {
            try await cache.value(for: key) {
                await loads.add(key)
                return [UInt8](repeating: 1, count: bytes)
            }
        }
        _ = try await get("a")
        _ = try await get("b")
        _ = try await get("a")  // a is now more recent than b
        _ = try await get("c")  // 120 bytes > 100: b goes
        _ = try await get("a")
        _ = try await get("c")
        #expect(await loads.counts == ["a": 1, "b": 1, "c": 1])
        _ = try await get("b")
        #expect(await loads.counts["b"] == 2)
        _ = try await get("huge", bytes: 500)  // larger than the whole budget: served, never stored
        _ = try await get("huge", bytes: 500)
        #expect(await loads.counts["huge"] == 2)
    }

    @Test func concurrentMissesShareOneLoadAndExpiredEntriesReload() async throws {
        let loads = Loads()
        let clock = StoppedClock()
        let cache = ExpiringCache<Int>(lifetime: 1, capacity: 10, clock: clock) { _ in 1 }
        let values = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    try await cache.value(for: "k") {
                        await loads.add("k")
                        // Holds the load open so that the others join it (they would hit
                        // the cache after it anyway: the count holds either way).
                        try await Task.sleep(for: .milliseconds(100))
                        return 7
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(values == Array(repeating: 7, count: 10))
        #expect(await loads.counts["k"] == 1)
        clock.advance(by: 1.2)
        _ = try await cache.value(for: "k") {
            await loads.add("k")
            return 8
        }
        #expect(await loads.counts["k"] == 2)
    }
}

/// What a failing provider's callers get: the last value, within the stale lifetime only.
@Suite struct ExpiringCacheStaleTests {
    @Test("an expired entry is served stale with its age until lifetime + staleLifetime, never after")
    func staleWindow() async throws {
        let clock = StoppedClock()
        let cache = ExpiringCache<String>(lifetime: 1, staleLifetime: 2, capacity: 10, clock: clock) { _ in 1 }
        #expect(await cache.stale(for: "k") == nil)
        _ = try await cache.value(for: "k") { "v1" }
        clock.advance(by: 1.1)
        let stale = try #require(await cache.stale(for: "k"))
        #expect(stale.value == "v1")
        #expect(stale.age >= 1.1)
        clock.advance(by: 2)
        #expect(await cache.stale(for: "k") == nil)
    }
}
