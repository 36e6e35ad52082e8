/// The provider API path of a passthrough call (what follows `/api` in the gateway's URL),
/// parsed into decoded segments and refused when it could reach anything but a path under
/// the provider's configured API base: no `.` or `..` segment (raw or encoded), no encoded
/// `/` or `\`, no empty segment, no scheme or host, no control characters. Templates match
/// the decoded segments; the upstream URL is rebuilt from them, re-encoded.
public struct APIPath: Sendable, Equatable, CustomStringConvertible {
    /// The decoded segments (`["v1.0", "me", "events"]`).
    public let segments: [String]

    /// Parses the raw (still percent-encoded) path, with or without its leading `/`.
    ///
    /// The path is split at its `/` bytes, as the router and the route split it: a slash
    /// followed by a combining mark is one `Character`, but still a separator.
    public init(raw: Substring) throws {
        let bytes = raw.utf8
        var start = bytes.startIndex
        if start < bytes.endIndex, bytes[start] == UInt8(ascii: "/") { bytes.formIndex(after: &start) }
        guard start < bytes.endIndex, bytes.distance(from: start, to: bytes.endIndex) <= 2048 else {
            throw Self.refused("The API path is empty or too long.")
        }
        var segments: [String] = []
        // One allocation for the list, not one per doubling.
        segments.reserveCapacity(1 + bytes[start...].lazy.filter { $0 == UInt8(ascii: "/") }.count)
        while true {
            // A `/` is a scalar of its own, so the slices begin and end on scalar boundaries.
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
            segments.append(try Self.segment(raw[start..<end]))
            guard end < bytes.endIndex else { break }
            start = bytes.index(after: end)
        }
        // `https:` as the first segment reads as a scheme to anyone who joins URLs carelessly;
        // no provider API path starts that way. Bytes again: a colon followed by a combining
        // mark is a colon too.
        if let first = segments.first, first.utf8.contains(UInt8(ascii: ":")) { throw Self.refused("The API path may not name a scheme or a host.") }
        self.segments = segments
    }

    /// One raw segment, decoded and checked.
    private static func segment(_ raw: Substring) throws -> String {
        guard !raw.isEmpty else { throw refused("The API path has an empty segment.") }
        guard let segment = FormEncoding.percentDecoded(raw) else { throw refused("The API path has an invalid percent-encoding.") }
        // Compared as bytes: `String`'s `==` compares canonical equivalence.
        guard !readsAsDotOrEmpty(segment), !segment.utf8.contains(where: isRefusedInSegment) else {
            throw refused("The API path may not contain dot segments, encoded slashes or control characters.")
        }
        return segment
    }

    /// Whether some server reads `segment` as a dot segment or an empty one: nothing but dots,
    /// or nothing at all, before its first `;` (servlet containers drop path parameters, so
    /// `..;x` is `..` to them and `;x` an empty segment, which Tomcat merges away; IIS reads a
    /// run of dots as `..`). A template's `{param}` matches any segment, so such a segment would
    /// reach another endpoint of the provider than the template allows.
    private static func readsAsDotOrEmpty(_ segment: String) -> Bool {
        segment.utf8.prefix { $0 != UInt8(ascii: ";") }.allSatisfy { $0 == UInt8(ascii: ".") }
    }

    /// A decoded slash or backslash, a C0 control character or DEL, scanned as UTF-8 bytes: no
    /// byte of a multi-byte sequence is below 0x80, so every such character is found wherever
    /// it stands. Foundation's `String.contains(_:)` (an `NSString` search) compares grapheme
    /// clusters, so it missed a slash followed by a combining mark (`%2F%CC%B8`), and it was
    /// 2 % of a passthrough call's CPU.
    private static func isRefusedInSegment(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "/") || byte == UInt8(ascii: "\\") || byte < 0x20 || byte == 0x7F
    }

    /// `/v1.0/me/events`, with each segment re-encoded (the form sent upstream).
    public var description: String { encoded }

    /// The path as sent upstream: `/` plus each segment percent-encoded where it must be
    /// (the characters RFC 3986 allows in a segment stay, so `users;use_login=1` is unchanged).
    public var encoded: String {
        // Appended into one string sized for the unescaped path: one allocation where mapping
        // and joining the segments takes three.
        var path = ""
        path.reserveCapacity(segments.reduce(0) { $0 + 1 + $1.utf8.count })
        for segment in segments {
            path.append("/")
            path.append(Self.encodeSegment(segment))
        }
        return path
    }

    private static func encodeSegment(_ segment: String) -> String {
        // Most segments (`v1.0`, `me`, ids) need no escaping: they go as they are.
        guard segment.utf8.contains(where: { !segmentCharacters[Int($0)] }) else { return segment }
        var out = ""
        for byte in segment.utf8 {
            if segmentCharacters[Int(byte)] {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// RFC 3986 `pchar` without `%`: unreserved, sub-delims, `:` and `@`; indexed by byte.
    private static let segmentCharacters: [Bool] = {
        var allowed = [Bool](repeating: false, count: 256)
        for byte in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@".utf8 { allowed[Int(byte)] = true }
        return allowed
    }()

    private static func refused(_ detail: String) -> GatehouseError {
        GatehouseError.pathNotAllowed(detail)
    }
}
