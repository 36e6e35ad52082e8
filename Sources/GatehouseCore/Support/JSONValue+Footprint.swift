extension JSONValue {
    /// About how many bytes of memory the value holds once parsed: each string's UTF-8 bytes
    /// (object keys included), 32 for every value, and for each container its own block: 64
    /// for an array, 96 and 64 a member for an object (its hash table, kept at most three
    /// quarters full, and the member's slot). Caches weigh what they keep by it, since a
    /// provider's answer may be as large as its cap allows (256 KB for userinfo, 1 MB for
    /// GitHub's `/user`), and a count of entries alone would not bound their memory.
    public var approximateBytes: Int {
        switch self {
        case .null, .bool, .number: 32
        case .string(let text): 32 + text.utf8.count
        case .array(let elements): elements.reduce(64) { $0 + $1.approximateBytes }
        case .object(let members): members.reduce(96) { $0 + 64 + $1.key.utf8.count + $1.value.approximateBytes }
        }
    }
}
