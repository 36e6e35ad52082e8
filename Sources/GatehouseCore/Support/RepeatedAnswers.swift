import Foundation

extension JSONValue {
    /// Parses a provider's answer about a user that most often repeats byte for byte from one
    /// call to the next (userinfo, GitHub's `/user` and `/user/emails`, Graph's `/me`): an
    /// answer seen lately is not parsed again. The parse is a pure function of the bytes, so
    /// the value held for them is the value they parse to, whoever's answer they were.
    ///
    /// Why: parsing a userinfo answer through `JSONDecoder` was 7 % of a live OpenID profile's
    /// CPU, the largest part of it that is the gateway's own; a user's profile refreshed
    /// without change answers the same bytes each time.
    ///
    /// Bounded: answers up to `RepeatedAnswers.largestHeld` bytes, `RepeatedAnswers.capacity`
    /// of them. A larger answer, or one that does not parse, is parsed each time it comes.
    static func parseRepeated(_ bytes: [UInt8], held answers: RecentValues<RepeatedAnswers.Key, JSONValue> = RepeatedAnswers.recent)
        throws -> JSONValue
    {
        guard bytes.count <= RepeatedAnswers.largestHeld else { return try parse(Data(bytes)) }
        let key = RepeatedAnswers.Key(bytes: bytes)
        if let value = answers.value(for: key) { return value }
        let value = try parse(Data(bytes))
        answers.insert(value, for: key)
        return value
    }
}

/// The answers `JSONValue.parseRepeated` holds, shared by every provider of the process.
enum RepeatedAnswers {
    /// The largest answer held (a userinfo answer is well under 1 KB, GitHub's `/user` about
    /// 1.3 KB).
    static let largestHeld = 4 << 10

    /// How many answers are held: at most about 8 MB of bytes and trees together, typically
    /// a few hundred KB.
    static let capacity = 512

    static let recent = RecentValues<Key, JSONValue>(capacity: capacity)

    /// An answer's bytes, hashed all at once (`Array`'s own hash feeds the hasher one byte at
    /// a time).
    struct Key: Hashable, Sendable {
        let bytes: [UInt8]

        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }
}
