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
}
