/// An ordered list of HTTP header fields with case-insensitive look-up.
///
/// Order and duplicates are kept because some headers (`Set-Cookie`, `Link`) may repeat.
public struct OutboundHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields in the order they were added or received.
    public private(set) var fields: [(name: String, value: String)]

    /// Creates an empty header list.
    public init() { self.fields = [] }

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
        fields.removeAll { $0.name.lowercased() == name.lowercased() }
    }

    /// The first value of the named field, compared case-insensitively.
    public subscript(name: String) -> String? {
        let wanted = name.lowercased()
        return fields.first { $0.name.lowercased() == wanted }?.value
    }

    /// Every value of the named field, in order.
    public func values(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return fields.filter { $0.name.lowercased() == wanted }.map(\.value)
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
