/// An ordered list of HTTP header fields with case-insensitive look-up.
///
/// Order and duplicates are kept because some headers (`Set-Cookie`, `Link`) may repeat.
/// Names compare as field names do (RFC 9110, section 5.1: tokens, case-insensitive ASCII),
/// byte by byte without a lower-cased copy of either: a passthrough call looks up a dozen names
/// in an answer of a dozen fields, so copies would be made for every field at every look-up.
public struct OutboundHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields in the order they were added or received.
    public private(set) var fields: [(name: String, value: String)]

    /// Creates an empty header list.
    public init() { self.fields = [] }

    /// Creates an empty header list with room for `capacity` fields.
    public init(capacity: Int) {
        self.fields = []
        fields.reserveCapacity(capacity)
    }

    /// Creates a header list from literal pairs, in order.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// Appends a field, keeping any existing field of the same name.
    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: name, value: value))
    }

    /// Replaces every field of that name with one field.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    /// Removes every field of that name.
    public mutating func remove(_ name: String) {
        fields.removeAll { Self.sameName($0.name, name) }
    }

    /// The first value of the named field (names compared by `sameName`).
    public subscript(name: String) -> String? {
        fields.first { Self.sameName($0.name, name) }?.value
    }

    /// Every value of the named field, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    /// Whether two field names are the same name: equal but for the case of ASCII letters.
    /// No other character has a case here: a name with a Kelvin sign (U+212A) is not `link`,
    /// as it would be under Unicode's case mapping.
    public static func sameName(_ left: String, _ right: String) -> Bool {
        left.utf8.count == right.utf8.count && left.utf8.elementsEqual(right.utf8) { lowercased($0) == lowercased($1) }
    }

    /// A field name with its ASCII letters in lower case, and nothing else changed: the same
    /// string, not a copy, when it has no upper-case letter (as HTTP/2 names and most
    /// providers' HTTP/1.1 names have not).
    public static func lowercasedName(_ name: String) -> String {
        guard name.utf8.contains(where: isUppercase) else { return name }
        let count = name.utf8.count
        return String(unsafeUninitializedCapacity: count) { buffer in
            for (index, byte) in name.utf8.enumerated() { buffer[index] = lowercased(byte) }
            return count
        }
    }

    private static func isUppercase(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "A") < 26
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        isUppercase(byte) ? byte | 0x20 : byte
    }

    /// Iterates over the fields in order.
    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    /// Two header lists are equal when they hold the same fields in the same order.
    public static func == (lhs: OutboundHeaders, rhs: OutboundHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }
}
