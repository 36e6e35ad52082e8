/// The `.high` transfers waiting for a slot: one line for each `OutboundRequest.share` that has
/// any waiting, and one for those without a share. Used on the driver thread only.
///
/// A free slot goes to the earliest arrival among the heads of the lines whose share may start
/// one more (`popFirst(where:)`), so with every share allowed the order is first come first
/// started, exactly as one line would give, and a share held back does not hold back the
/// others behind it. Choosing costs one look at each line's head: the lines are as many as the
/// shares with transfers waiting (the providers and the hooks), never a scan of the transfers.
struct ShareLines {
    /// The lines, each with its share (`nil`: transfers without one); a line that empties is
    /// dropped, so there are never more than the shares waiting.
    private var lines: [(share: String?, line: WaitingTransfers)] = []
    /// Where each share's line is in `lines`.
    private var indexOfShare: [String: Int] = [:]
    /// Where the line of the transfers without a share is, if any waits.
    private var unsharedIndex: Int?
    /// The next arrival number.
    private var arrivals: UInt64 = 0

    /// How many wait, in all lines.
    private(set) var count = 0
    /// Whether none waits.
    var isEmpty: Bool { count == 0 }

    /// Adds `transfer` at the end of its share's line.
    mutating func append(_ transfer: Transfer) {
        transfer.arrival = arrivals
        arrivals &+= 1
        let share = transfer.request.share
        let place: Int
        if let existing = index(of: share) {
            place = existing
        } else {
            place = lines.count
            lines.append((share, WaitingTransfers()))
            if let share { indexOfShare[share] = place } else { unsharedIndex = place }
        }
        lines[place].line.append(transfer)
        count += 1
    }

    /// Whether any transfer of `share` (`nil`: without one) waits.
    func holds(share: String?) -> Bool {
        index(of: share) != nil
    }

    /// Where the line of `share` (`nil`: transfers without one) is, if it has one.
    private func index(of share: String?) -> Int? {
        if let share { return indexOfShare[share] }
        return unsharedIndex
    }

    /// Takes the earliest arrival among the heads of the lines for whose share `mayStart`
    /// holds (`nil` for transfers without a share); `nil` when none may start.
    mutating func popFirst(where mayStart: (String?) -> Bool) -> Transfer? {
        var best: (index: Int, arrival: UInt64)?
        var index = 0
        while index < lines.count {
            guard let head = lines[index].line.first() else {
                // Emptied by cancellations or timeouts taken out of the middle.
                dropLine(at: index)
                continue
            }
            if mayStart(lines[index].share), best.map({ head.arrival < $0.arrival }) ?? true { best = (index, head.arrival) }
            index += 1
        }
        guard let best, let transfer = lines[best.index].line.popFirst() else { return nil }
        count -= 1
        if lines[best.index].line.isEmpty { dropLine(at: best.index) }
        return transfer
    }

    /// Takes `transfer` out of its line; whether it was in one.
    mutating func remove(_ transfer: Transfer) -> Bool {
        guard let place = index(of: transfer.request.share), lines[place].line.remove(transfer) else { return false }
        count -= 1
        if lines[place].line.isEmpty { dropLine(at: place) }
        return true
    }

    /// Takes out every transfer for which `shouldLeave` holds, keeping the others' order.
    mutating func removeAll(where shouldLeave: (Transfer) -> Bool) -> [Transfer] {
        var left: [Transfer] = []
        var index = 0
        while index < lines.count {
            left += lines[index].line.removeAll(where: shouldLeave)
            if lines[index].line.isEmpty { dropLine(at: index) } else { index += 1 }
        }
        count -= left.count
        return left
    }

    /// Removes the line at `index`, moving the last line into its place.
    private mutating func dropLine(at index: Int) {
        if let share = lines[index].share { indexOfShare[share] = nil } else { unsharedIndex = nil }
        let last = lines.count - 1
        if index != last {
            lines.swapAt(index, last)
            if let share = lines[index].share { indexOfShare[share] = index } else { unsharedIndex = index }
        }
        lines.removeLast()
    }
}
