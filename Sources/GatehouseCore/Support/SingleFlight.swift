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

    /// The result of the run in progress for `key`, or of `work` started now.
    func run(_ key: Key, _ work: @escaping @Sendable () async throws -> Value) async throws -> Value {
        try await task(for: key, work).value
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
