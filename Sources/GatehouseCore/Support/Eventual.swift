import Synchronization

/// A value that becomes known once, later (the port a listener got, say), awaited by any
/// number of tasks; or the error that means it never will. Waiting honours cancellation, so a
/// task never hangs on a value that cannot come.
public final class Eventual<Value: Sendable>: Sendable {
    private enum State {
        case waiting([Int: CheckedContinuation<Value, any Error>], next: Int)
        case settled(Result<Value, any Error>)
    }

    private let state = Mutex(State.waiting([:], next: 0))

    /// An unknown value.
    public init() {}

    /// Makes the value known and wakes every waiter; ignored once settled.
    public func set(_ value: Value) { settle(.success(value)) }

    /// Settles with an error every waiter (and every later one) receives; ignored once settled.
    public func fail(_ error: any Error) { settle(.failure(error)) }

    private func settle(_ result: Result<Value, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, any Error>] in
            guard case .waiting(let waiters, _) = state else { return [] }
            state = .settled(result)
            return Array(waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    /// The value, once known; throws the error it settled with, or `CancellationError` when
    /// the waiting task is cancelled first.
    public func value() async throws -> Value {
        // Settled: answered without suspending (a continuation resumed at once still costs a
        // trip through the executor).
        if let settled = state.withLock({ state -> Result<Value, any Error>? in
            if case .settled(let result) = state { return result }
            return nil
        }) {
            return try settled.get()
        }
        let ticket = Mutex<Int?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let now = state.withLock { state -> Result<Value, any Error>? in
                    switch state {
                    case .settled(let result): return result
                    // Cancelled before this registration: the handler found nothing to wake.
                    case .waiting where Task.isCancelled: return .failure(CancellationError())
                    case .waiting(var waiters, let next):
                        waiters[next] = continuation
                        state = .waiting(waiters, next: next + 1)
                        ticket.withLock { $0 = next }
                        return nil
                    }
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Value, any Error>? in
                guard case .waiting(var waiters, let next) = state, let id = ticket.withLock({ $0 }) else { return nil }
                let waiter = waiters.removeValue(forKey: id)
                state = .waiting(waiters, next: next)
                return waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
