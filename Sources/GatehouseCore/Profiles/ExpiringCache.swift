import Foundation

/// A bounded, expiring cache with single flight: concurrent misses for one key share one
/// load, answers live for `lifetime`, and the least recently used entries go first when the
/// total cost passes `capacity` (bytes for photos, entries for profiles). Failures are not cached.
actor ExpiringCache<Value: Sendable> {
    private struct Entry {
        let value: Value
        let storedAt: Date
        let cost: Int
    }

    private let lifetime: TimeInterval
    private let capacity: Int
    private let cost: @Sendable (Value) -> Int
    private var entries: [String: Entry] = [:]
    private var recency: [String] = []
    private var totalCost = 0
    private var inFlight: [String: Task<Value, any Error>] = [:]

    /// Creates a cache; a `lifetime` of zero turns it off entirely (every call loads on its own).
    init(lifetime: TimeInterval, capacity: Int, cost: @escaping @Sendable (Value) -> Int) {
        self.lifetime = lifetime
        self.capacity = capacity
        self.cost = cost
    }

    /// The cached value, or the result of `load` (shared with concurrent callers); `bypass`
    /// skips a cached value but stores the fresh one.
    func value(for key: String, bypass: Bool = false, load: @escaping @Sendable () async throws -> Value) async throws -> Value {
        guard lifetime > 0 else { return try await load() }
        if !bypass, let entry = entries[key], Date().timeIntervalSince(entry.storedAt) < lifetime {
            touch(key)
            return entry.value
        }
        if let running = inFlight[key] { return try await running.value }
        let task = Task { try await load() }
        inFlight[key] = task
        defer { inFlight[key] = nil }
        let value = try await task.value
        store(value, for: key)
        return value
    }

    private func touch(_ key: String) {
        if let index = recency.firstIndex(of: key) { recency.remove(at: index) }
        recency.append(key)
    }

    private func store(_ value: Value, for key: String) {
        guard lifetime > 0 else { return }
        let size = cost(value)
        guard size <= capacity else { return }
        if let old = entries.removeValue(forKey: key) { totalCost -= old.cost }
        entries[key] = Entry(value: value, storedAt: Date(), cost: size)
        totalCost += size
        touch(key)
        while totalCost > capacity, let oldest = recency.first {
            recency.removeFirst()
            if let evicted = entries.removeValue(forKey: oldest) { totalCost -= evicted.cost }
        }
    }
}
