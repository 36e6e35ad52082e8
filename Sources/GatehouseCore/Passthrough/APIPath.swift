/// The provider API path of a passthrough call (what follows `/api` in the gateway's URL),
/// parsed into decoded segments and refused when it could reach anything but a path under
/// the provider's configured API base: no `.` or `..` segment (raw or encoded), no encoded
/// `/` or `\`, no empty segment, no scheme or host, no control characters. Templates match
/// the decoded segments; the upstream URL is rebuilt from them, re-encoded.
public struct APIPath: Sendable, Equatable, CustomStringConvertible {
    /// The decoded segments (`["v1.0", "me", "events"]`).
    public let segments: [String]

    /// Parses the raw (still percent-encoded) path, with or without its leading `/`.
    public init(raw: Substring) throws {
        var path = raw
        if path.first == "/" { path = path.dropFirst() }
        guard !path.isEmpty, path.utf8.count <= 2048 else { throw Self.refused("The API path is empty or too long.") }
        var segments: [String] = []
        for rawSegment in path.split(separator: "/", omittingEmptySubsequences: false) {
            guard !rawSegment.isEmpty else { throw Self.refused("The API path has an empty segment.") }
            guard let segment = FormEncoding.percentDecoded(rawSegment) else {
                throw Self.refused("The API path has an invalid percent-encoding.")
            }
            guard segment != ".", segment != "..", !segment.contains("/"), !segment.contains("\\"),
                !segment.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else {
                throw Self.refused("The API path may not contain dot segments, encoded slashes or control characters.")
            }
            segments.append(segment)
        }
        // `https:` as the first segment reads as a scheme to anyone who joins URLs carelessly;
        // no provider API path starts that way.
        if let first = segments.first, first.contains(":") { throw Self.refused("The API path may not name a scheme or a host.") }
        self.segments = segments
    }

    /// `/v1.0/me/events`, with each segment re-encoded (the form sent upstream).
    public var description: String { encoded }

    /// The path as sent upstream: `/` plus each segment percent-encoded where it must be
    /// (the characters RFC 3986 allows in a segment stay, so `users;use_login=1` is unchanged).
    public var encoded: String {
        "/" + segments.map(Self.encodeSegment).joined(separator: "/")
    }

    private static func encodeSegment(_ segment: String) -> String {
        var out = ""
        for byte in segment.utf8 {
            if Self.segmentCharacters.contains(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// RFC 3986 `pchar` without `%`: unreserved, sub-delims, `:` and `@`.
    private static let segmentCharacters: Set<UInt8> = Set(
        Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@".utf8))

    private static func refused(_ detail: String) -> GatehouseError {
        GatehouseError.pathNotAllowed(detail)
    }
}
