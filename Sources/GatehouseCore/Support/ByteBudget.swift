import Synchronization

/// Bytes held in memory for one purpose across the process, within a limit: each holder takes
/// its bytes before it reads them and gives them back when it lets them go, so that however many
/// callers read at once, together they never hold more than `limit`.
public final class ByteBudget: Sendable {
    /// The most bytes held at once.
    public let limit: Int
    private let held = Mutex(0)
    /// Told the bytes held after each change (a gauge).
    private let observe: @Sendable (Int) -> Void

    /// A budget of `limit` bytes, nothing held.
    public init(limit: Int, observe: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.limit = limit
        self.observe = observe
    }

    /// The bytes held now.
    public var inUse: Int { held.withLock { $0 } }

    /// Takes `count` bytes when they fit beside those held; `false` (nothing taken) otherwise.
    fileprivate func take(_ count: Int) -> Bool {
        let now = held.withLock { held -> Int? in
            guard count <= limit - held else { return nil }
            held += count
            return held
        }
        guard let now else { return false }
        observe(now)
        return true
    }

    /// Gives back `count` bytes taken before.
    fileprivate func give(_ count: Int) {
        guard count > 0 else { return }
        observe(
            held.withLock { held in
                held -= count
                return held
            })
    }

    /// One holder's bytes: taken chunk by chunk as they are read, given back all at once when
    /// the hold goes away (the answer written, or dropped on any failure), so no path can
    /// forget to return them.
    public final class Hold: Sendable {
        private let budget: ByteBudget
        private let count = Mutex(0)

        /// A hold on `budget`, of nothing yet.
        public init(on budget: ByteBudget) {
            self.budget = budget
        }

        /// Takes `bytes` more for this hold; `false` (nothing taken) when they do not fit.
        public func grow(by bytes: Int) -> Bool {
            guard budget.take(bytes) else { return false }
            count.withLock { $0 += bytes }
            return true
        }

        /// The bytes this hold has taken.
        public var bytes: Int { count.withLock { $0 } }

        deinit {
            budget.give(count.withLock { $0 })
        }
    }
}
