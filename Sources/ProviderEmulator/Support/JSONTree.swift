import Foundation

/// The emulator's `[String: Any]` answers as an `Encodable` tree, written by `JSONEncoder`.
///
/// Foundation's `JSONSerialization` with sorted keys compares every pair of keys through
/// `NSString` with a locale: writing GitHub's `/user` that way was about a quarter of the mallocs
/// of a whole sign-in (the allocation benchmark's). Values of any other kind (an `NSNumber`
/// from a parsed body, a date) make `init` fail, and the caller falls back to
/// `JSONSerialization`.
enum JSONTree: Encodable {
    /// `null` (`NSNull`).
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// An integer.
    case int(Int)
    /// A number with a fraction.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONTree])
    /// An object.
    case object([String: JSONTree])

    /// `value` as a tree; `nil` when it holds a kind the tree has no case for. Numbers and
    /// booleans are matched by their exact type: a cast would read an `NSNumber` 1 as `true`.
    init?(_ value: Any) {
        if let string = value as? String {
            self = .string(string)
        } else if type(of: value) == Bool.self, let bool = value as? Bool {
            self = .bool(bool)
        } else if type(of: value) == Int.self, let int = value as? Int {
            self = .int(int)
        } else if type(of: value) == Double.self, let double = value as? Double {
            self = .double(double)
        } else if value is NSNull {
            self = .null
        } else if let object = value as? [String: Any] {
            var members = [String: JSONTree](minimumCapacity: object.count)
            for (key, member) in object {
                guard let tree = JSONTree(member) else { return nil }
                members[key] = tree
            }
            self = .object(members)
        } else if let array = value as? [Any] {
            var elements: [JSONTree] = []
            elements.reserveCapacity(array.count)
            for element in array {
                guard let tree = JSONTree(element) else { return nil }
                elements.append(tree)
            }
            self = .array(elements)
        } else {
            return nil
        }
    }

    /// Writes the value; `.null` as an explicit `null` (GitHub's `/user` has `"email": null`).
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// Sorted keys, slashes unescaped. Keys are sorted by their UTF-8 bytes, where
    /// `JSONSerialization` sorted them case-insensitively with digits compared as numbers: the
    /// order of two keys differing only so (`Zeta`/`alpha`, `item10`/`item2`) is not the same,
    /// which no client may depend on. The fallback keeps `JSONSerialization`'s order.
    static func data(_ object: Any) -> Data? {
        guard let tree = JSONTree(object) else {
            return try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try? encoder.encode(tree)
    }
}
