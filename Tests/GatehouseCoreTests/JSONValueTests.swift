import Foundation
import Testing

@testable import GatehouseCore

/// `JSONValue`: every JSON kind decodes to its own case, whatever order the kinds are tried in.
struct JSONValueTests {
    @Test(
        "null, booleans, numbers, strings that look like other kinds, arrays and objects (empty and nested) decode to their own case and encode back")
    func everyKind() throws {
        let text = #"""
            {"null": null, "yes": true, "no": false, "int": 42, "negative": -0.5, "big": 1e300, "text": "héllo",
             "textTrue": "true", "textNumber": "1", "textNull": "null", "empty": [], "emptyObject": {},
             "list": [1, "1", true, null, [], {"a": [false]}], "nested": {"b": {"c": "d"}}}
            """#
        let value = try JSONCoding.decoder().decode(JSONValue.self, from: Data(text.utf8))
        let expected: JSONValue = .object([
            "null": .null, "yes": .bool(true), "no": .bool(false), "int": .number(42), "negative": .number(-0.5), "big": .number(1e300),
            "text": .string("héllo"), "textTrue": .string("true"), "textNumber": .string("1"), "textNull": .string("null"), "empty": .array([]),
            "emptyObject": .object([:]),
            "list": .array([.number(1), .string("1"), .bool(true), .null, .array([]), .object(["a": .array([.bool(false)])])]),
            "nested": .object(["b": .object(["c": .string("d")])]),
        ])
        #expect(value == expected)
        let again = try JSONCoding.decoder().decode(JSONValue.self, from: try JSONCoding.encoder().encode(value))
        #expect(again == expected)
        for scalar in ["true", "false", "null", "3", "\"x\"", "[]", "{}"] {
            #expect(throws: Never.self) { try JSONCoding.decoder().decode(JSONValue.self, from: Data(scalar.utf8)) }
        }
        #expect(try JSONCoding.decoder().decode(JSONValue.self, from: Data("true".utf8)) == .bool(true))
    }

    @Test("parse reads every kind at every depth, arrays whose elements change kind included; typed documents (init(from:)) read the same")
    func parseEveryKind() throws {
        let text = #"""
            {"list": ["a", 1, "b", true, {}, [], null, {"x": [1, "1"]}, "c", [[false], [null]], 2.5, false],
             "records": [{"email": "a@example.com", "primary": true}, {"email": "b@example.com", "primary": false}],
             "n": null, "t": "x", "f": 0.25, "b": false, "o": {"p": {"q": []}}}
            """#
        let parsed = try JSONValue.parse(Data(text.utf8))
        #expect(parsed == (try JSONCoding.decoder().decode(JSONValue.self, from: Data(text.utf8))))
        #expect(
            parsed["list"]
                == .array([
                    .string("a"), .number(1), .string("b"), .bool(true), .object([:]), .array([]), .null,
                    .object(["x": .array([.number(1), .string("1")])]), .string("c"), .array([.array([.bool(false)]), .array([.null])]),
                    .number(2.5), .bool(false),
                ]))
        let holds = parsed["records"]?.arrayValue?.map { $0["primary"]?.boolValue } == [true, false]
        #expect(holds)
        #expect(parsed["o"]?["p"]?["q"] == .array([]))
        for (document, expected) in [
            ("[1, \"2\", [3]]", JSONValue.array([.number(1), .string("2"), .array([.number(3)])])), ("\"x\"", .string("x")), ("7", .number(7)),
            ("true", .bool(true)), ("null", .null), ("[]", .array([])), ("{}", .object([:])),
        ] {
            #expect(try JSONValue.parse(Data(document.utf8)) == expected)
        }
        for broken in ["", "{", "{\"a\" 1}", "tru", "{\"a\": 1} x", "{\"a\": 1e400}", "[1, -1e400]", "{\"a\": {\"b\": [1e999]}}"] {
            #expect(throws: (any Error).self, "\(broken)") { try JSONValue.parse(Data(broken.utf8)) }
        }
        // A name given twice counts once, with its first value.
        #expect(try JSONValue.parse(Data(#"{"sub": "first", "sub": "second"}"#.utf8)) == .object(["sub": .string("first")]))
        // Nesting deeper than the decoder allows is refused, not followed.
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: (any Error).self) { try JSONValue.parse(Data(deep.utf8)) }
        let nested = String(repeating: "{\"a\":", count: 100) + "1" + String(repeating: "}", count: 100)
        var inner = try JSONValue.parse(Data(nested.utf8))
        for _ in 0..<100 { inner = try #require(inner["a"]) }
        #expect(inner == .number(1))
    }

    @Test("parse reads 500 generated documents back as the values they were encoded from, as init(from:) does")
    func parseAgreesOnGeneratedDocuments() throws {
        var generator = SplitMix(seed: 0x6A7E_4055)
        for _ in 0..<500 {
            let value = JSONValue.generated(depth: 0, using: &generator)
            let data = try JSONCoding.encoder().encode(value)
            let parsed = try JSONValue.parse(data)
            #expect(parsed == value)
            #expect(parsed == (try JSONCoding.decoder().decode(JSONValue.self, from: data)))
        }
    }
}

extension JSONValue {
    /// A random value: scalars of every kind (strings that look like other kinds among them),
    /// and arrays and objects up to four levels deep, homogeneous or mixed.
    fileprivate static func generated(depth: Int, using generator: inout SplitMix) -> JSONValue {
        let kinds = depth >= 4 ? 4 : 6
        switch Int.random(in: 0..<kinds, using: &generator) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &generator))
        case 2: return .number([0, 1, -3, 2.5, 1e20, -0.125][Int.random(in: 0..<6, using: &generator)])
        case 3: return .string(["", "a", "true", "1", "null", "é\n\"", "{}"][Int.random(in: 0..<7, using: &generator)])
        case 4:
            let homogeneous = Bool.random(using: &generator)
            let first = generated(depth: depth + 1, using: &generator)
            return .array(
                (0..<Int.random(in: 0..<5, using: &generator)).map { _ in homogeneous ? first : generated(depth: depth + 1, using: &generator) })
        default:
            var object: [String: JSONValue] = [:]
            for index in 0..<Int.random(in: 0..<5, using: &generator) { object["k\(index)"] = generated(depth: depth + 1, using: &generator) }
            return .object(object)
        }
    }
}
