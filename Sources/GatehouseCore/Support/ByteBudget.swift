import Synchronization

/// Bytes held in memory for one purpose across the process, within a limit, a share per owner
/// (a caller) and a share for one group of owners (callers anyone may become, such as
/// signed-in users): each holder takes its bytes before it reads them and gives them back when
/// it lets them go, so that however many callers read at once, together they never hold more
/// than `limit`, no one owner more than `ownerLimit` of it, and the group no more than
/// `groupLimit`.
public final class ByteBudget: Sendable {
    /// The most bytes held at once.
    public let limit: Int
    /// The most bytes one owner holds at once.
    public let ownerLimit: Int
    /// The most bytes the group's owners hold at once, together.
    public let groupLimit: Int
    private struct Held {
        var total = 0
        var grouped = 0
        /// Only owners holding bytes now: the map is as large as the holders are many.
        var byOwner: [String: Int] = [:]

        func admits(_ count: Int, _ owned: Int, grouped inGroup: Bool, _ budget: ByteBudget) -> Bool {
            count <= budget.limit - total && count <= budget.ownerLimit - owned && (!inGroup || count <= budget.groupLimit - grouped)
        }
    }
    private let held = Mutex(Held())
    /// Told the bytes held after each change (a gauge).
    private let observe: @Sendable (Int) -> Void

    /// A budget of `limit` bytes, at most `ownerLimit` of them one owner's and `groupLimit`
    /// the group's; nothing held.
    public init(limit: Int, ownerLimit: Int, groupLimit: Int, observe: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.limit = limit
        self.ownerLimit = min(ownerLimit, limit)
        self.groupLimit = min(groupLimit, limit)
        self.observe = observe
    }

    /// The bytes held now.
    public var inUse: Int { held.withLock { $0.total } }

    /// Whether `owner` (of the group, when `grouped`) has room left: a caller about to make a
    /// call whose answer will be read whatever the budget holds asks first.
    public func hasRoom(for owner: String, grouped: Bool) -> Bool {
        held.withLock { $0.admits(1, $0.byOwner[owner] ?? 0, grouped: grouped, self) }
    }

    /// Takes `count` bytes for `owner` when they fit beside those held (or whether or not they
    /// fit, when `overdrawing`); `false` (nothing taken) otherwise.
    fileprivate func take(_ count: Int, for owner: String, grouped: Bool, overdrawing: Bool) -> Bool {
        let now = held.withLock { held -> Int? in
            let owned = held.byOwner[owner] ?? 0
            guard overdrawing || held.admits(count, owned, grouped: grouped, self) else { return nil }
            held.total += count
            if grouped { held.grouped += count }
            held.byOwner[owner] = owned + count
            return held.total
        }
        guard let now else { return false }
        observe(now)
        return true
    }

    /// Gives back `count` bytes `owner` took before.
    fileprivate func give(_ count: Int, for owner: String, grouped: Bool) {
        guard count > 0 else { return }
        observe(
            held.withLock { held in
                held.total -= count
                if grouped { held.grouped -= count }
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
        private let grouped: Bool
        private let overdrawing: Bool
        private let count = Mutex(0)

        /// A hold of `owner` (of the group, when `grouped`) on `budget`, of nothing yet. An
        /// `overdrawing` hold always takes what it reads (an answer to a call the provider may
        /// have acted on: refusing it would tell the caller to send again what was done),
        /// counted against the others; its caller asks `hasRoom` before making the call.
        public init(on budget: ByteBudget, owner: String, grouped: Bool = false, overdrawing: Bool = false) {
            self.budget = budget
            self.owner = owner
            self.grouped = grouped
            self.overdrawing = overdrawing
        }

        /// Takes `bytes` more for this hold; `false` (nothing taken) when they do not fit.
        public func grow(by bytes: Int) -> Bool {
            guard budget.take(bytes, for: owner, grouped: grouped, overdrawing: overdrawing) else { return false }
            count.withLock { $0 += bytes }
            return true
        }

        /// The bytes this hold has taken.
        public var bytes: Int { count.withLock { $0 } }

        deinit {
            budget.give(count.withLock { $0 }, for: owner, grouped: grouped)
        }
    }
}
