import Foundation

/// A bounded, expiring cache with single flight: concurrent misses for one key share one
/// load, answers live for `lifetime`, and the least recently used entries go first when the
/// total cost passes `capacity` (bytes: a photo's buffer, a profile's `approximateBytes`). Failures are not
/// cached. Expired entries stay (within the budget) for `staleLifetime` more, so that a
/// failing provider can be answered from them, marked stale.
actor ExpiringCache<Value: Sendable> {
    private struct Entry {
        let value: Value
        let storedAt: Date
        let cost: Int
        /// A use counter: larger is more recent. Kept per entry so that a hit is O(1).
        var lastUse: UInt64
    }

    private let lifetime: TimeInterval
    private let staleLifetime: TimeInterval
    private let capacity: Int
    private let name: String
    private let metrics: GatehouseMetrics
    private let cost: @Sendable (Value) -> Int
    private let wallClock: any GatehouseClock
    private var entries: [String: Entry] = [:]
    private var clock: UInt64 = 0
    private var totalCost = 0
    private let loads = SingleFlight<String, Value>()

    /// Creates a cache; a `lifetime` of zero turns it off entirely (every call loads on its
    /// own). `name` labels its hit/miss metrics.
    init(
        name: String = "cache", lifetime: TimeInterval, staleLifetime: TimeInterval = 0, capacity: Int, metrics: GatehouseMetrics = .disabled,
        clock: any GatehouseClock = SystemClock(), cost: @escaping @Sendable (Value) -> Int
    ) {
        self.wallClock = clock
        self.name = name
        self.lifetime = lifetime
        self.staleLifetime = staleLifetime
        self.capacity = capacity
        self.metrics = metrics
        self.cost = cost
    }

    /// The cached value, or the result of `load` (shared with concurrent callers); `bypass`
    /// skips a cached value but stores the fresh one.
    func value(for key: String, bypass: Bool = false, load: @escaping @Sendable () async throws -> Value) async throws -> Value {
        guard lifetime > 0 else { return try await load() }
        if bypass {
            metrics.cacheLookup(cache: name, result: "miss")
        } else if let value = fresh(for: key) {
            return value
        }
        // Registered before this actor suspends: a concurrent miss joins this load.
        let shared = loads.task(for: key) {
            let value = try await load()
            // Weighed before the actor is entered: a large value's walk (a profile's whole
            // answer) does not hold up the cache's other callers.
            await self.insert(value, for: key, cost: self.cost(value))
            return value
        }
        return try await shared.value
    }

    /// The value for `key` if it is still fresh (counted as a hit, otherwise as a miss), for
    /// callers that load and `insert` themselves.
    func fresh(for key: String) -> Value? {
        guard lifetime > 0, let entry = entries[key], wallClock.now().timeIntervalSince(entry.storedAt) < lifetime else {
            metrics.cacheLookup(cache: name, result: "miss")
            return nil
        }
        clock += 1
        entries[key]?.lastUse = clock
        metrics.cacheLookup(cache: name, result: "hit")
        return entry.value
    }

    /// The last value stored for `key` and its age in seconds, if younger than lifetime plus
    /// stale lifetime: what a failing provider's callers get instead of an error.
    func stale(for key: String) -> (value: Value, age: TimeInterval)? {
        guard let entry = entries[key] else { return nil }
        let age = wallClock.now().timeIntervalSince(entry.storedAt)
        guard age < lifetime + staleLifetime else { return nil }
        metrics.cacheLookup(cache: name, result: "stale")
        return (entry.value, age)
    }

    /// The value stored for `key` whatever its age, without counting a lookup: a loader
    /// comparing what it fetched with what is kept (the same photo is kept once).
    func stored(for key: String) -> Value? {
        entries[key]?.value
    }

    /// Stores `value` for `key`, evicting within the budget; a value larger than the whole
    /// budget is not kept. `cost`: the value's weight, when the caller has it already.
    func insert(_ value: Value, for key: String, cost given: Int? = nil) {
        guard lifetime > 0 else { return }
        let size = given ?? cost(value)
        guard size <= capacity else { return }
        defer { metrics.cacheUsed(cache: name, cost: totalCost) }
        clock += 1
        if let old = entries.updateValue(Entry(value: value, storedAt: wallClock.now(), cost: size, lastUse: clock), forKey: key) {
            totalCost -= old.cost
        }
        totalCost += size
        guard totalCost > capacity else { return }
        // Over budget: drop entries past any use (stale ones included), then the least recently
        // used down to 90 % of the budget, so that the sort is paid once per batch rather than
        // on every insert.
        let now = wallClock.now()
        for (staleKey, entry) in entries where now.timeIntervalSince(entry.storedAt) >= lifetime + staleLifetime {
            entries[staleKey] = nil
            totalCost -= entry.cost
        }
        let target = capacity - capacity / 10
        for (oldKey, entry) in entries.sorted(by: { $0.value.lastUse < $1.value.lastUse }) where totalCost > target && oldKey != key {
            entries[oldKey] = nil
            totalCost -= entry.cost
        }
    }
}
