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
        // The held value answers, not a new parse: a marker held for the bytes comes back.
        held.insert(.string("held"), for: RepeatedAnswers.Key(bytes: userInfo))
        #expect(try JSONValue.parseRepeated(userInfo, held: held) == .string("held"))

        // A changed answer is another key, parsed on its own.
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

    @Test("an answer of up to the largest size is held, one byte more is parsed and not held")
    func sizeBound() throws {
        let held = RecentValues<RepeatedAnswers.Key, JSONValue>(capacity: 8)
        func answer(size: Int) -> [UInt8] {
            let frame = Array(#"{"sub":"1","bio":""}"#.utf8)
            return Array(frame.dropLast(2)) + Array(repeating: UInt8(ascii: "x"), count: size - frame.count) + Array(#""}"#.utf8)
        }
        let largest = answer(size: RepeatedAnswers.largestHeld)
        #expect(largest.count == RepeatedAnswers.largestHeld)
        #expect(try JSONValue.parseRepeated(largest, held: held)["sub"]?.stringValue == "1")
        #expect(held.count == 1)
        let larger = answer(size: RepeatedAnswers.largestHeld + 1)
        #expect(try JSONValue.parseRepeated(larger, held: held)["bio"]?.stringValue?.count == larger.count - 20)
        #expect(held.count == 1)
    }

    @Test("an answer whose tree has more values than the largest held is parsed and not held")
    func treeBound() throws {
        let held = RecentValues<RepeatedAnswers.Key, JSONValue>(capacity: 8)
        // 1 array + n one-element arrays + n numbers: small in bytes, many values.
        func nested(_ n: Int) -> [UInt8] { Array(("[" + Array(repeating: "[0]", count: n).joined(separator: ",") + "]").utf8) }
        let largest = nested((RepeatedAnswers.largestTree - 1) / 2)
        #expect(try JSONValue.parseRepeated(largest, held: held).valueCount(upTo: 1_000) <= RepeatedAnswers.largestTree)
        #expect(held.count == 1)
        let larger = nested(RepeatedAnswers.largestTree / 2)
        #expect(try JSONValue.parseRepeated(larger, held: held).valueCount(upTo: 1_000) == RepeatedAnswers.largestTree + 1)
        #expect(held.count == 1)
        #expect(try JSONValue.parse(Data(#"{"a":[1,{"b":null}],"c":"d"}"#.utf8)).valueCount(upTo: 100) == 6)
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
