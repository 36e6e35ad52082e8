import Synchronization

/// Whether a transaction may still commit: it may until its caller has been answered
/// (`expire`, by the timeout), and once it has begun to commit the answer waits for it. The
/// two decide under one lock, so a transaction never commits after its caller was told
/// `unavailable`.
final class CommitGate: Sendable {
    private enum State {
        case open
        case committing
        case expired
    }

    private let state = Mutex(State.open)

    /// Called before `COMMIT`: `false` when the caller was answered already (roll back).
    func mayCommit() -> Bool {
        state.withLock { state in
            guard case .open = state else { return false }
            state = .committing
            return true
        }
    }

    /// Called at the time limit: `true` when nothing can commit any more, `false` when the
    /// commit is under way (its outcome is the answer).
    func expire() -> Bool {
        state.withLock { state in
            guard case .open = state else { return false }
            state = .expired
            return true
        }
    }
}
