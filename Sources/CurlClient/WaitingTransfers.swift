/// The transfers waiting for a slot, first come first started. Used on the driver thread only.
///
/// An array read from a moving head. A transfer that leaves from the middle (cancelled) is only
/// marked (`Transfer.isWaiting`) and skipped when reached, so that many callers leaving at once
/// cost one step each, not a scan of the line each; the storage is rebuilt without the marked
/// ones once they are as many as those waiting, so it stays within twice the longest line.
struct WaitingTransfers {
    private var items: [Transfer] = []
    private var head = 0

    /// How many wait.
    private(set) var count = 0
    /// Whether none waits.
    var isEmpty: Bool { count == 0 }

    /// Adds `transfer` at the end of the line.
    mutating func append(_ transfer: Transfer) {
        transfer.isWaiting = true
        items.append(transfer)
        count += 1
    }

    /// The first in line, left in it (those marked as gone before it are dropped on the way).
    mutating func first() -> Transfer? {
        while head < items.count, !items[head].isWaiting { head += 1 }
        compactIfWorthIt()
        return head < items.count ? items[head] : nil
    }

    /// Takes the first in line.
    mutating func popFirst() -> Transfer? {
        while head < items.count {
            let first = items[head]
            head += 1
            guard first.isWaiting else { continue }
            first.isWaiting = false
            count -= 1
            compactIfWorthIt()
            return first
        }
        compactIfWorthIt()
        return nil
    }

    /// Takes `transfer` out of the line; whether it was in it.
    mutating func remove(_ transfer: Transfer) -> Bool {
        guard transfer.isWaiting else { return false }
        transfer.isWaiting = false
        count -= 1
        compactIfWorthIt()
        return true
    }

    /// Takes out every transfer for which `shouldLeave` holds, keeping the others' order.
    mutating func removeAll(where shouldLeave: (Transfer) -> Bool) -> [Transfer] {
        var left: [Transfer] = []
        var kept: [Transfer] = []
        kept.reserveCapacity(count)
        for transfer in items[head...] where transfer.isWaiting {
            if shouldLeave(transfer) {
                transfer.isWaiting = false
                left.append(transfer)
            } else {
                kept.append(transfer)
            }
        }
        if !left.isEmpty || kept.count != items.count - head {
            items = kept
            head = 0
            count = kept.count
        }
        return left
    }

    /// Drops what was taken from the head, or the marked ones, once they are as many as
    /// those waiting (and at least 64: small lines are not worth copying).
    private mutating func compactIfWorthIt() {
        if count == 0 {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if items.count - count >= max(64, count) {
            items = items[head...].filter(\.isWaiting)
            head = 0
        }
    }
}
