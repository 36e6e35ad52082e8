import Foundation
import Testing

@testable import GatehouseCore

/// `JSONValue.parseRepeated`: an answer seen lately is not parsed again, and what it answers
/// is what parsing the bytes answers.
@Suite struct RepeatedAnswersTests {
    let userInfo = Array(
        #"{"sub":"248289761001","name":"Jane Doe","email":"jane@example.com","email_verified":true,"age":42.5,"groups":["a","b"],"address":null}"#
            .utf8)

    @Test("a repeated answer is held after its first parse and answers the same value")
    func repeatedAnswerIsHeld() throws {
        let held = RecentValues<RepeatedAnswers.Key, JSONValue>(capacity: 8)
        let first = try JSONValue.parseRepeated(userInfo, held: held)
        #expect(first == (try JSONValue.parse(Data(userInfo))))
        #expect(held.value(for: RepeatedAnswers.Key(bytes: userInfo)) == first)
        #expect(try JSONValue.parseRepeated(userInfo, held: held) == first)
        #expect(held.count == 1)

        // One byte more is another answer, parsed on its own.
        let changed = Array(#"{"sub":"248289761001","name":"Jane Doe."}"#.utf8)
        #expect(try JSONValue.parseRepeated(changed, held: held)["name"]?.stringValue == "Jane Doe.")
        #expect(held.count == 2)
    }

    @Test("an answer that does not parse throws each time and is not held")
    func brokenAnswerIsNotHeld() {
        let held = RecentValues<RepeatedAnswers.Key, JSONValue>(capacity: 8)
        let broken = Array(#"{"sub":"248289761001","#.utf8)
        for _ in 0..<2 {
            #expect(throws: (any Error).self) { try JSONValue.parseRepeated(broken, held: held) }
        }
        #expect(held.count == 0)
    }

    @Test("an answer larger than the largest held is parsed and not held")
    func largeAnswerIsNotHeld() throws {
        let held = RecentValues<RepeatedAnswers.Key, JSONValue>(capacity: 8)
        let large = Array(("{\"sub\":\"1\",\"bio\":\"" + String(repeating: "x", count: RepeatedAnswers.largestHeld) + "\"}").utf8)
        #expect(try JSONValue.parseRepeated(large, held: held)["sub"]?.stringValue == "1")
        #expect(held.count == 0)
    }

    @Test("the held answers stay within their capacity")
    func heldAnswersAreBounded() throws {
        let held = RecentValues<RepeatedAnswers.Key, JSONValue>(capacity: 4)
        for n in 0..<50 {
            _ = try JSONValue.parseRepeated(Array(#"{"sub":"\#(n)"}"#.utf8), held: held)
        }
        #expect(held.count <= 4)
    }
}
