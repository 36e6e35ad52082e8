/// The transfers waiting for a slot, first come first started. Used on the driver thread only.
///
/// An array read from a moving head: taking the first is O(1), and the taken prefix is
/// dropped once it is at least half of the storage, so the storage stays within twice the
/// longest line.
struct WaitingTransfers {
    private var items: [Transfer] = []
    private var head = 0

    /// How many wait.
    var count: Int { items.count - head }
    /// Whether none waits.
    var isEmpty: Bool { head == items.count }

    /// Adds `transfer` at the end of the line.
    mutating func append(_ transfer: Transfer) {
        items.append(transfer)
    }

    /// Takes the first in line.
    mutating func popFirst() -> Transfer? {
        guard head < items.count else { return nil }
        let first = items[head]
        head += 1
        compactIfWorthIt()
        return first
    }

    /// Takes `transfer` out of the line, wherever it is; whether it was there.
    mutating func remove(_ transfer: Transfer) -> Bool {
        guard let index = items[head...].firstIndex(where: { $0 === transfer }) else { return false }
        items.remove(at: index)
        return true
    }

    /// Takes out every transfer for which `shouldLeave` holds, keeping the others' order.
    mutating func removeAll(where shouldLeave: (Transfer) -> Bool) -> [Transfer] {
        var left: [Transfer] = []
        var kept: [Transfer] = []
        kept.reserveCapacity(count)
        for transfer in items[head...] {
            if shouldLeave(transfer) { left.append(transfer) } else { kept.append(transfer) }
        }
        if !left.isEmpty {
            items = kept
            head = 0
        }
        return left
    }

    private mutating func compactIfWorthIt() {
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
    }
}
