import Foundation

extension JSONValue {
    /// Parses a provider's answer about a user that most often repeats byte for byte from one
    /// call to the next (userinfo, GitHub's `/user` and `/user/emails`, Graph's `/me`): an
    /// answer seen lately is not parsed again. The parse is a pure function of the bytes, so
    /// the value held for them is the value they parse to, whoever's answer they were.
    ///
    /// Why: parsing a userinfo answer through `JSONDecoder` was 7–9 % of a live OpenID
    /// profile's CPU in perf (about 11 µs per request), the largest part of it that is the
    /// gateway's own; a user's profile refreshed without change answers the same bytes each time.
    ///
    /// Bounded (`RepeatedAnswers`): answers up to `largestHeld` bytes whose tree has at most
    /// `largestTree` values, `capacity` of them. Any other answer, or one that does not parse,
    /// is parsed each time it comes.
    static func parseRepeated(_ bytes: [UInt8], held answers: RecentValues<RepeatedAnswers.Key, JSONValue> = RepeatedAnswers.recent)
        throws -> JSONValue
    {
        guard bytes.count <= RepeatedAnswers.largestHeld else { return try parse(Data(bytes)) }
        if let value = answers.value(for: RepeatedAnswers.Key(bytes: bytes)) { return value }
        let value = try parse(Data(bytes))
        if value.valueCount(upTo: RepeatedAnswers.largestTree + 1) <= RepeatedAnswers.largestTree {
            // A copy of exactly the answer's bytes: the response's own array may have grown
            // past them while libcurl appended its reads.
            answers.insert(value, for: RepeatedAnswers.Key(bytes: bytes.withUnsafeBufferPointer { Array($0) }))
        }
        return value
    }

    /// How many values the tree holds, itself included, counted up to `limit`.
    func valueCount(upTo limit: Int) -> Int {
        var counted = 0
        var pending = [self]
        while let value = pending.popLast(), counted < limit {
            counted += 1
            switch value {
            case .array(let elements): pending += elements
            case .object(let members): pending += members.values
            default: break
            }
        }
        return counted
    }
}

/// The answers `JSONValue.parseRepeated` holds, shared by every provider of the process.
///
/// What they cost at most: `capacity` entries of a key of at most `largestHeld` bytes and a
/// tree of at most `largestTree` values, each value up to about a hundred bytes with its
/// container's storage (a tree of one-element arrays is the worst), plus its strings, which
/// the key's bytes bound: under 10 MB in all. A userinfo answer with its tree is about 2 KB.
///
/// They hold the profile fields (names, addresses) of recent answers in memory only, until
/// newer answers push them out; nothing maps them to an account, so deleting one does not
/// remove them.
enum RepeatedAnswers {
    /// The largest answer held (a userinfo answer is well under 1 KB, GitHub's `/user` about
    /// 1.3 KB).
    static let largestHeld = 4 << 10

    /// The most values an answer's tree may have to be held (GitHub's `/user` has about 35).
    static let largestTree = 256

    /// How many answers are held.
    static let capacity = 256

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
