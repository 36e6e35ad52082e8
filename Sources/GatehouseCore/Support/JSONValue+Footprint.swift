extension JSONValue {
    /// About how many bytes of memory the value holds: each string's UTF-8 bytes (object keys
    /// included) and a fixed 32 for every value and member, roughly what an enum case, a
    /// string's header and a dictionary slot take. Caches weigh what they keep by it, since a
    /// provider's answer may be as large as its cap allows (256 KB for userinfo, 1 MB for
    /// GitHub's `/user`), and a count of entries alone would not bound their memory.
    public var approximateBytes: Int {
        switch self {
        case .null, .bool, .number: 32
        case .string(let text): 32 + text.utf8.count
        case .array(let elements): elements.reduce(32) { $0 + $1.approximateBytes }
        case .object(let members): members.reduce(32) { $0 + 32 + $1.key.utf8.count + $1.value.approximateBytes }
        }
    }
}
