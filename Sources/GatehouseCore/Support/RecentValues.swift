import Synchronization

/// A bounded map of recently used values: two generations of at most `capacity / 2` entries
/// each; when the newer one fills up, the older one is dropped and the newer one takes its
/// place, and a hit in the older one moves to the newer. Least recently used entries leave
/// first (approximately), and memory never exceeds `capacity` entries.
public final class RecentValues<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Generations {
        var newer: [Key: Value] = [:]
        var older: [Key: Value] = [:]
    }

    private let state = Mutex(Generations())
    private let generationSize: Int

    /// A map of at most `capacity` entries.
    public init(capacity: Int) {
        generationSize = max(1, capacity / 2)
    }

    /// The value of `key`, if it is still held.
    public func value(for key: Key) -> Value? {
        state.withLock { state in
            if let value = state.newer[key] { return value }
            guard let value = state.older.removeValue(forKey: key) else { return nil }
            Self.insert(value, for: key, into: &state, limit: generationSize)
            return value
        }
    }

    /// Holds `value` for `key`.
    public func insert(_ value: Value, for key: Key) {
        state.withLock { Self.insert(value, for: key, into: &$0, limit: generationSize) }
    }

    /// Drops `key`'s value.
    public func remove(_ key: Key) {
        state.withLock { state in
            state.newer[key] = nil
            state.older[key] = nil
        }
    }

    /// How many entries are held (tests).
    public var count: Int { state.withLock { $0.newer.count + $0.older.count } }

    private static func insert(_ value: Value, for key: Key, into state: inout Generations, limit: Int) {
        if state.newer[key] == nil, state.newer.count >= limit {
            state.older = state.newer
            state.newer = [:]
        }
        state.newer[key] = value
    }
}
