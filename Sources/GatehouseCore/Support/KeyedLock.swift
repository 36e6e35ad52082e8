/// Mutual exclusion per key within one process, for async code: callers of `run` with the
/// same key run one after another, in arrival order; different keys do not wait for each other.
public actor KeyedLock {
    private var queues: [String: [CheckedContinuation<Void, Never>]] = [:]

    /// An unlocked set of locks.
    public init() {}

    /// Runs `body` holding the lock `key`.
    public func run<T: Sendable>(_ key: String, _ body: @Sendable () async throws -> T) async throws -> T {
        await acquire(key)
        defer { release(key) }
        return try await body()
    }

    private func acquire(_ key: String) async {
        if queues[key] == nil {
            queues[key] = []
            return
        }
        await withCheckedContinuation { queues[key, default: []].append($0) }
    }

    private func release(_ key: String) {
        guard var waiting = queues[key], !waiting.isEmpty else {
            queues[key] = nil
            return
        }
        // Handed straight to the next waiter: the key stays held.
        let next = waiting.removeFirst()
        queues[key] = waiting
        next.resume()
    }
}
