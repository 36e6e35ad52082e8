import Synchronization

/// Whether a write may still commit (a transaction) or be sent (a single statement): it may
/// until its caller has been answered (`expire`, by the timeout), and once it has begun the
/// answer waits for it (`PostgresStorage.withinTimeout`). The two decide under one lock, so a
/// write the caller was told `unavailable` for is never begun after.
final class CommitGate: Sendable {
    private enum State {
        case open
        case committing
        case expired
    }

    private let state = Mutex(State.open)

    /// Called before `COMMIT` or before a single statement is sent: `false` when the caller was
    /// answered already (roll back, or send nothing).
    func mayCommit() -> Bool {
        state.withLock { state in
            guard case .open = state else { return false }
            state = .committing
            return true
        }
    }

    /// Called at the time limit: `true` when nothing can commit any more, `false` when the
    /// commit or statement is under way (its outcome is the answer).
    func expire() -> Bool {
        state.withLock { state in
            guard case .open = state else { return false }
            state = .expired
            return true
        }
    }
}
