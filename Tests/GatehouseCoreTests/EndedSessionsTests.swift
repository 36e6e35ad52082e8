import Foundation
import Testing

@testable import GatehouseCore

/// `EndedSessions`: ended sessions remembered until their tokens expire, within a bound.
@Suite struct EndedSessionsTests {
    @Test("an ended session is kept until its tokens expire; past the capacity, expired ones make room, else a new one is not kept")
    func boundedAndExpiring() {
        let ended = EndedSessions(capacity: 2)
        let start = Date(timeIntervalSince1970: 1_000_000)
        ended.insert("a", until: start.addingTimeInterval(60), now: start)
        ended.insert("b", until: start.addingTimeInterval(3600), now: start)
        ended.insert("c", until: start.addingTimeInterval(3600), now: start)
        #expect(ended.contains("a", now: start) && ended.contains("b", now: start))
        #expect(!ended.contains("c", now: start), "full: not kept")
        #expect(!ended.contains("a", now: start.addingTimeInterval(61)), "its tokens have expired")
        ended.insert("c", until: start.addingTimeInterval(3600), now: start.addingTimeInterval(61))
        #expect(ended.contains("c", now: start.addingTimeInterval(61)), "the expired one made room")
        #expect(ended.count == 2)
    }

    @Test("a full memory with nothing expired is not scanned at each insert: once, when the earliest kept session expires")
    func fullMemoryScansOncePerExpiry() {
        let ended = EndedSessions(capacity: 100)
        let start = Date(timeIntervalSince1970: 1_000_000)
        for index in 0..<100 { ended.insert("kept-\(index)", until: start.addingTimeInterval(60 + Double(index)), now: start) }
        for index in 0..<1000 { ended.insert("new-\(index)", until: start.addingTimeInterval(3600), now: start) }
        #expect(ended.scans == 0)
        #expect(ended.count == 100)
        let later = start.addingTimeInterval(60.5)
        ended.insert("after", until: later.addingTimeInterval(3600), now: later)
        ended.insert("after-2", until: later.addingTimeInterval(3600), now: later)
        #expect(ended.scans == 1, "the first expired session made room; the next insert found the memory full until the next expiry")
        #expect(ended.contains("after", now: later))
        #expect(!ended.contains("after-2", now: later))
    }
}
