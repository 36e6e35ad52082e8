import Synchronization

/// Bytes held in memory for one purpose across the process, within a limit, a share per owner
/// (a caller), and a share for one group of owners (callers anyone may become, such as
/// signed-in users) with a smaller share for each of them: each holder takes its bytes before it
/// reads them and gives them back when it lets them go, so that however many callers read at
/// once, together they never hold more than `limit`, no one owner more than its share, and the
/// group no more than `groupLimit`.
public final class ByteBudget: Sendable {
    /// The most bytes held at once.
    public let limit: Int
    /// The most bytes one owner outside the group holds at once.
    public let ownerLimit: Int
    /// The most bytes the group's owners hold at once, together.
    public let groupLimit: Int
    /// The most bytes one owner of the group holds at once.
    public let groupOwnerLimit: Int
    private struct Held {
        var total = 0
        var grouped = 0
        /// Only owners holding bytes now: the map is as large as the holders are many.
        var byOwner: [String: Int] = [:]
    }
    private let held = Mutex(Held())
    /// Told the bytes held after each change (a gauge).
    private let observe: @Sendable (Int) -> Void

    /// A budget of `limit` bytes, at most `ownerLimit` of them one owner's, `groupLimit` the
    /// group's and `groupOwnerLimit` one of the group's owners'; nothing held.
    public init(limit: Int, ownerLimit: Int, groupLimit: Int, groupOwnerLimit: Int, observe: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.limit = limit
        self.ownerLimit = min(ownerLimit, limit)
        self.groupLimit = min(groupLimit, limit)
        self.groupOwnerLimit = min(groupOwnerLimit, self.groupLimit)
        self.observe = observe
    }

    /// The bytes held now.
    public var inUse: Int { held.withLock { $0.total } }

    /// Takes `count` bytes for `owner` when they fit beside those held (or whether or not they
    /// fit, when `overdrawing`); `false` (nothing taken) otherwise.
    fileprivate func take(_ count: Int, for owner: String, grouped: Bool, overdrawing: Bool) -> Bool {
        let now = held.withLock { held -> Int? in
            let owned = held.byOwner[owner] ?? 0
            let fits =
                count <= limit - held.total && count <= (grouped ? groupOwnerLimit : ownerLimit) - owned
                && (!grouped || count <= groupLimit - held.grouped)
            guard overdrawing || fits else { return nil }
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

    /// One holder's bytes: set aside ahead (`reserve`) or taken chunk by chunk as they are
    /// read (`grow`), given back all at once when the hold goes away (the answer written, or
    /// dropped on any failure), so no path can forget to return them.
    public final class Hold: Sendable {
        private let budget: ByteBudget
        private let owner: String
        private let grouped: Bool
        private let overdrawing: Bool
        /// The bytes taken from the budget, and those of them read so far.
        private let state = Mutex((taken: 0, used: 0))

        /// A hold of `owner` (of the group, when `grouped`) on `budget`, of nothing yet. An
        /// `overdrawing` hold takes what it reads beyond what it set aside, whether or not it
        /// fits (an answer to a call the provider may have acted on: refusing it would tell the
        /// caller to send again what was done); its caller sets bytes aside before the call.
        public init(on budget: ByteBudget, owner: String, grouped: Bool = false, overdrawing: Bool = false) {
            self.budget = budget
            self.owner = owner
            self.grouped = grouped
            self.overdrawing = overdrawing
        }

        /// Sets `bytes` aside within every share; `false` (nothing taken) when they do not fit.
        public func reserve(_ bytes: Int) -> Bool {
            guard bytes > 0 else { return true }
            guard budget.take(bytes, for: owner, grouped: grouped, overdrawing: false) else { return false }
            state.withLock { $0.taken += bytes }
            return true
        }

        /// Counts `bytes` more as read, from what was set aside first, then taken from the
        /// budget; `false` (nothing counted) when those do not fit. One reader grows a hold.
        public func grow(by bytes: Int) -> Bool {
            let more = state.withLock { max(0, $0.used + bytes - $0.taken) }
            guard more == 0 || budget.take(more, for: owner, grouped: grouped, overdrawing: overdrawing) else { return false }
            state.withLock {
                $0.taken += more
                $0.used += bytes
            }
            return true
        }

        /// The bytes this hold has taken from the budget.
        public var bytes: Int { state.withLock { $0.taken } }

        deinit {
            budget.give(state.withLock { $0.taken }, for: owner, grouped: grouped)
        }
    }
}
