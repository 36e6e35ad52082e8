/// The heads a driver loop hands over at the end of its turn (see `Transfer.receiveBody`).
/// Driver thread only.
final class HeadDeliveries {
    /// Transfers whose body began during this turn.
    var pending: [Transfer] = []

    /// Hands over every pending head; a transfer that ended or failed meanwhile had its own.
    func deliver() {
        guard !pending.isEmpty else { return }
        for transfer in pending { transfer.deliverHeadIfNeeded() }
        pending.removeAll(keepingCapacity: true)
    }
}
