import Testing

@testable import GatehouseCore

/// The bounded map behind decoded profile snapshots.
@Suite struct RecentValuesTests {
    @Test("holds at most its capacity; recently read entries survive, the least recently used leave first")
    func bounded() {
        let values = RecentValues<Int, String>(capacity: 4)
        for key in 0..<2 { values.insert("v\(key)", for: key) }
        #expect(values.value(for: 0) == "v0" && values.count == 2)
        // The third entry starts a new generation; 0 and 1 are older now.
        values.insert("v2", for: 2)
        #expect(values.value(for: 0) == "v0", "a read moves an older entry to the newer generation")
        values.insert("v3", for: 3)
        values.insert("v4", for: 4)
        #expect(values.value(for: 1) == nil, "1 was never read again: it left")
        #expect(values.value(for: 3) == "v3" && values.value(for: 0) == "v0", "the newest and a recently read one stay")
        for key in 10..<1000 { values.insert("v\(key)", for: key) }
        #expect(values.count <= 4)
        #expect(values.value(for: 999) == "v999")
    }
}
