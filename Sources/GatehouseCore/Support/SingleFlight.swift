import Synchronization

/// Concurrent callers asking for the same key share one run of the work: the first starts
/// it, the others await its result (or its error); the next call after it ended starts
/// afresh. Nothing is kept once a run ends, so memory is bounded by the runs in progress.
///
/// `task(for:_:)` is synchronous on purpose: an actor that checked its cache and then asks
/// here does so without a suspension in between, so no second run can slip into the gap.
final class SingleFlight<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct State {
        var runs: [Key: (id: UInt64, task: Task<Value, any Error>)] = [:]
        var lastID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// A single flight with nothing running.
    init() {}

    /// The run in progress for `key`, or `work` started now; the run forgets itself when it ends.
    func task(for key: Key, _ work: @escaping @Sendable () async throws -> Value) -> Task<Value, any Error> {
        state.withLock { state in
            if let run = state.runs[key] { return run.task }
            state.lastID += 1
            let id = state.lastID
            let task = Task {
                defer { self.end(key, id) }
                return try await work()
            }
            state.runs[key] = (id, task)
            return task
        }
    }

    /// The result of the run in progress for `key`, or of `work` started now; a cancelled
    /// caller stops waiting at once, as in `value(of:)`.
    func run(_ key: Key, _ work: @escaping @Sendable () async throws -> Value) async throws -> Value {
        try await value(of: task(for: key, work))
    }

    /// The result of `task` (a run of this single flight), or `CancellationError` as soon as the
    /// caller is cancelled: the run goes on for the callers still waiting, and a cancelled
    /// request (a server stopping, a client gone) does not wait for an upstream that hangs.
    func value(of task: Task<Value, any Error>) async throws -> Value {
        let waiter = Waiter()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                waiter.continuation.withLock { $0 = continuation }
                Task {
                    let result = await task.result
                    waiter.resume(with: result)
                }
                // Cancelled before the continuation was there for the handler to resume.
                if Task.isCancelled { waiter.resume(with: .failure(CancellationError())) }
            }
        } onCancel: {
            waiter.resume(with: .failure(CancellationError()))
        }
    }

    /// One caller's wait in `value(of:)`: resumed once, by the run's end or the caller's cancellation.
    private final class Waiter: Sendable {
        let continuation = Mutex<CheckedContinuation<Value, any Error>?>(nil)

        func resume(with result: Result<Value, any Error>) {
            continuation.withLock { $0.take() }?.resume(with: result)
        }
    }

    /// Whether a run for `key` is in progress.
    func isRunning(_ key: Key) -> Bool {
        state.withLock { $0.runs[key] != nil }
    }

    private func end(_ key: Key, _ id: UInt64) {
        state.withLock { state in
            if state.runs[key]?.id == id { state.runs[key] = nil }
        }
    }
}
