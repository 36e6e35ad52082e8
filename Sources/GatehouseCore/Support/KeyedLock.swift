/// Mutual exclusion per key within one process, for async code: callers of `run` with the
/// same key run one after another, in arrival order; different keys do not wait for each other.
/// A waiter gives up after its wait (`KeyedLock.WaitTimedOut`) or when its task is cancelled
/// (`CancellationError`), leaving its place to the next: a holder that never ends (a provider's
/// token call under a long timeout) holds up requests for a bounded time, and a request whose
/// client left does not stay queued.
public actor KeyedLock {
    /// A caller waiting for a key, resumed with the key or with the error it gave up on.
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
        /// Ends the wait at its deadline; cancelled once the waiter is resumed.
        let timer: Task<Void, Never>
    }

    /// The waiters of each held key, in arrival order; a key held by nobody has no entry.
    private var queues: [String: [Waiter]] = [:]
    private var lastID: UInt64 = 0

    /// The error of a waiter that waited `run`'s whole `wait`.
    public struct WaitTimedOut: Error, Sendable {
        /// The key it waited for.
        public let key: String
    }

    /// An unlocked set of locks.
    public init() {}

    /// Runs `body` holding the lock `key`, waiting at most `wait` for it.
    public func run<T: Sendable>(_ key: String, waitingAtMost wait: Duration, _ body: @Sendable () async throws -> T) async throws -> T {
        try await acquire(key, wait: wait)
        defer { release(key) }
        return try await body()
    }

    private func acquire(_ key: String, wait: Duration) async throws {
        if queues[key] == nil {
            queues[key] = []
            return
        }
        lastID &+= 1
        let id = lastID
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let timer = Task { [weak self] in
                    guard (try? await Task.sleep(for: wait)) != nil else { return }
                    await self?.giveUp(key, id: id, WaitTimedOut(key: key))
                }
                queues[key, default: []].append(Waiter(id: id, continuation: continuation, timer: timer))
            }
        } onCancel: {
            // Runs on the actor after the waiter is queued (this call holds it until then).
            Task { await self.giveUp(key, id: id, CancellationError()) }
        }
    }

    /// Ends the wait of waiter `id` with `error`, unless it was handed the key already.
    private func giveUp(_ key: String, id: UInt64, _ error: any Error) {
        guard var waiting = queues[key], let index = waiting.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiting.remove(at: index)
        queues[key] = waiting
        waiter.timer.cancel()
        waiter.continuation.resume(throwing: error)
    }

    private func release(_ key: String) {
        guard var waiting = queues[key], !waiting.isEmpty else {
            queues[key] = nil
            return
        }
        // Handed straight to the next waiter: the key stays held.
        let next = waiting.removeFirst()
        queues[key] = waiting
        next.timer.cancel()
        next.continuation.resume()
    }
}
