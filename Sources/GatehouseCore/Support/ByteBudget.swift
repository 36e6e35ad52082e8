import Synchronization

/// Bytes held in memory for one purpose across the process, within a limit and within a share
/// per owner (a caller): each holder takes its bytes before it reads them and gives them back
/// when it lets them go, so that however many callers read at once, together they never hold
/// more than `limit`, and no one owner holds more than `ownerLimit` of it.
public final class ByteBudget: Sendable {
    /// The most bytes held at once.
    public let limit: Int
    /// The most bytes one owner holds at once.
    public let ownerLimit: Int
    private struct Held {
        var total = 0
        /// Only owners holding bytes now: the map is as large as the holders are many.
        var byOwner: [String: Int] = [:]
    }
    private let held = Mutex(Held())
    /// Told the bytes held after each change (a gauge).
    private let observe: @Sendable (Int) -> Void

    /// A budget of `limit` bytes, at most `ownerLimit` of them one owner's; nothing held.
    public init(limit: Int, ownerLimit: Int, observe: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.limit = limit
        self.ownerLimit = min(ownerLimit, limit)
        self.observe = observe
    }

    /// The bytes held now.
    public var inUse: Int { held.withLock { $0.total } }

    /// Takes `count` bytes for `owner` when they fit beside those held (or whether or not they
    /// fit, when `overdrawing`); `false` (nothing taken) otherwise.
    fileprivate func take(_ count: Int, for owner: String, overdrawing: Bool) -> Bool {
        let now = held.withLock { held -> Int? in
            let owned = held.byOwner[owner] ?? 0
            guard overdrawing || (count <= limit - held.total && count <= ownerLimit - owned) else { return nil }
            held.total += count
            held.byOwner[owner] = owned + count
            return held.total
        }
        guard let now else { return false }
        observe(now)
        return true
    }

    /// Gives back `count` bytes `owner` took before.
    fileprivate func give(_ count: Int, for owner: String) {
        guard count > 0 else { return }
        observe(
            held.withLock { held in
                held.total -= count
                let left = (held.byOwner[owner] ?? 0) - count
                held.byOwner[owner] = left > 0 ? left : nil
                return held.total
            })
    }

    /// One holder's bytes: taken chunk by chunk as they are read, given back all at once when
    /// the hold goes away (the answer written, or dropped on any failure), so no path can
    /// forget to return them.
    public final class Hold: Sendable {
        private let budget: ByteBudget
        private let owner: String
        private let overdrawing: Bool
        private let count = Mutex(0)

        /// A hold of `owner` on `budget`, of nothing yet. An `overdrawing` hold always takes
        /// what it reads (an answer to a call the provider may have acted on: refusing it would
        /// tell the caller to send again what was done), counted against the others.
        public init(on budget: ByteBudget, owner: String, overdrawing: Bool = false) {
            self.budget = budget
            self.owner = owner
            self.overdrawing = overdrawing
        }

        /// Takes `bytes` more for this hold; `false` (nothing taken) when they do not fit.
        public func grow(by bytes: Int) -> Bool {
            guard budget.take(bytes, for: owner, overdrawing: overdrawing) else { return false }
            count.withLock { $0 += bytes }
            return true
        }

        /// The bytes this hold has taken.
        public var bytes: Int { count.withLock { $0 } }

        deinit {
            budget.give(count.withLock { $0 }, for: owner)
        }
    }
}
