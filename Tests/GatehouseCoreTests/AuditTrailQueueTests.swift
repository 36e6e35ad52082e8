import DequeModule
import Foundation
import Testing

@testable import GatehouseCore

/// `AuditTrail`'s bounded queue of events waiting for the store.
@Suite struct AuditTrailQueueTests {
    static func record(_ index: Int) -> AuditRecord {
        AuditRecord(at: Date(timeIntervalSince1970: Double(index)), event: "account.created", actor: "system", uid: "u\(index)")
    }

    @Test("a batch the store refused goes back before what queued meanwhile, and past the capacity the oldest events are dropped, as when they queue")
    func refusedBatchKeepsTheNewest() {
        let batch = (0..<500).map(Self.record)
        var queue = Deque((500..<(500 + AuditTrail.capacity)).map(Self.record))
        let dropped = AuditTrail.requeue(batch, into: &queue)
        #expect(dropped == 500)
        #expect(queue.count == AuditTrail.capacity)
        #expect(queue.first?.uid == "u500" && queue.last?.uid == "u\(500 + AuditTrail.capacity - 1)")
        var short = Deque((500..<600).map(Self.record))
        #expect(AuditTrail.requeue(batch, into: &short) == 0)
        let expected = (0..<600).map { "u\($0)" }
        #expect(short.map(\.uid) == expected)
    }
}
