import Foundation

/// A list of allowed URL prefixes, compared on parsed URLs: same scheme, host and port as an
/// entry, and a path under the entry's path prefix at a segment boundary (so
/// `https://avatars.example` never admits `https://avatars.example.evil.example`, nor
/// `/pictures` admit `/pictures-evil`). `return_to` and photo URLs both go through it.
///
/// The parser is deliberately strict, because browsers and URL libraries disagree on odd
/// input: anything with user info, backslashes, control characters, encoded separators or
/// dot segments is refused rather than interpreted.
public struct URLAllowList: Sendable {
    /// A strictly parsed absolute URL.
    struct ParsedURL: Equatable {
        var scheme: String
        var host: String
        var port: Int
        var path: String

        /// `scheme://host[:port]`, the port only when it is not the scheme's default (as
        /// browsers send `Origin`).
        var origin: String {
            let defaultPort = scheme == "https" ? 443 : 80
            let hostPart = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
            return port == defaultPort ? "\(scheme)://\(hostPart)" : "\(scheme)://\(hostPart):\(port)"
        }
    }

    private let entries: [ParsedURL]

    /// The list of `entries` (invalid ones are ignored; configuration validation reports them).
    public init(_ entries: [String]) {
        self.entries = entries.compactMap(Self.parse)
    }

    /// Whether `entry` is a usable allow-list entry (an absolute http(s) URL, parsed strictly).
    public static func isValidEntry(_ entry: String) -> Bool { parse(entry) != nil }

    /// The origin (`scheme://host[:port]`, as browsers send `Origin`) of an absolute http(s)
    /// URL such as a `Referer`, or `nil` when its scheme and authority do not parse strictly.
    /// Only the authority is read: the page's path and query are not the gateway's to judge.
    public static func webOrigin(of url: String) -> String? {
        let bytes = url.utf8
        guard let separator = url.range(of: "://") else { return nil }
        let authority = bytes[separator.upperBound...]
        let end = authority.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? authority.endIndex
        return parse(String(url[..<end]))?.origin
    }

    /// Whether the list has no usable entry.
    public var isEmpty: Bool { entries.isEmpty }

    /// Whether `url` parses strictly and falls under an entry.
    public func allows(_ url: String) -> Bool {
        guard let url = Self.parse(url) else { return false }
        return entries.contains { entry in
            entry.scheme == url.scheme && entry.host == url.host && entry.port == url.port && Self.isUnder(url.path, prefix: entry.path)
        }
    }

    /// Whether `path` is `prefix` or lies under it at a segment boundary (`/a` admits `/a/b`,
    /// never `/ab`).
    static func isUnder(_ path: String, prefix: String) -> Bool {
        if prefix == "/" || prefix.isEmpty { return true }
        let directory = prefix.hasSuffix("/") ? prefix : prefix + "/"
        return path == prefix || path.hasPrefix(directory)
    }

    /// Parses `scheme://host[:port][/path][?query][#fragment]`, or `nil` for anything unusual.
    ///
    /// Reads the URL's bytes: only printable ASCII is accepted, so bytes and characters are
    /// one. A photo transfer checks its source here and the breakers key on its origin;
    /// Foundation's percent-decoding and case mapping made that a microsecond-scale cost on
    /// every transfer.
    static func parse(_ text: String) -> ParsedURL? {
        let bytes = Array(text.utf8)
        guard bytes.count <= 2048, bytes.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E && $0 != UInt8(ascii: "\\") }) else { return nil }
        let scheme: String
        if hasPrefix(bytes, "https://") {
            scheme = "https"
        } else if hasPrefix(bytes, "http://") {
            scheme = "http"
        } else {
            return nil
        }
        let rest = bytes[(scheme.utf8.count + 3)...]
        let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        let authority = rest[..<authorityEnd].map(lowercased)
        // No user info, no percent-encoding in the authority, no empty host.
        guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")), !authority.contains(UInt8(ascii: "%")) else { return nil }
        var host = authority[...]
        var port = scheme == "https" ? 443 : 80
        if let colon = authority.lastIndex(of: UInt8(ascii: ":")), authority.last != UInt8(ascii: "]") {
            guard let parsed = Int(String(decoding: authority[(colon + 1)...], as: UTF8.self)), (1...65535).contains(parsed) else { return nil }
            port = parsed
            host = authority[..<colon]
        }
        guard !host.isEmpty, host.allSatisfy(isHostByte) else { return nil }
        var hostText = String(decoding: host, as: UTF8.self)
        // An IPv6 literal, and only one, holds `[`, `]` or `:`; it is kept as browsers write it
        // (`Origin`, `location.href`), so that `[0:0::1]` and `[::1]` are one host.
        if host.contains(where: { $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "]") || $0 == UInt8(ascii: ":") }) {
            guard host.first == UInt8(ascii: "["), host.last == UInt8(ascii: "]"),
                let literal = ipv6Literal(String(decoding: host.dropFirst().dropLast(), as: UTF8.self))
            else { return nil }
            hostText = "[" + literal + "]"
        }
        let afterAuthority = rest[authorityEnd...]
        let path = afterAuthority[..<(afterAuthority.firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? afterAuthority.endIndex)]
        // Encoded slashes or backslashes could be re-interpreted by the app; dot segments
        // escape the prefix, encoded or not (browsers read `%2e%2e` as `..`).
        guard !containsEscape(path, of: UInt8(ascii: "/")), !containsEscape(path, of: UInt8(ascii: "\\")),
            !path.indices.contains(where: { $0 > path.startIndex && path[$0] == UInt8(ascii: "/") && path[$0 - 1] == UInt8(ascii: "/") })
        else { return nil }
        guard !hasDotSegment(path) else { return nil }
        return ParsedURL(
            scheme: scheme, host: hostText, port: port,
            path: path.isEmpty ? "/" : String(decoding: path, as: UTF8.self))
    }

    /// Whether `bytes` start with `prefix`, ASCII letters in any case.
    private static func hasPrefix(_ bytes: [UInt8], _ prefix: StaticString) -> Bool {
        guard bytes.count >= prefix.utf8CodeUnitCount else { return false }
        return prefix.withUTF8Buffer { zip(bytes, $0).allSatisfy { lowercased($0) == $1 } }
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }

    /// A host's bytes (lowercased): letters, digits, `.`, `-`, and an IPv6 literal's `[`, `]`, `:`.
    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"),
            UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: ":"):
            true
        default: false
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Whether `path` holds `%XX` escaping `byte`.
    private static func containsEscape(_ path: ArraySlice<UInt8>, of byte: UInt8) -> Bool {
        var index = path.startIndex
        while index + 2 < path.endIndex {
            if path[index] == UInt8(ascii: "%"), let high = hexValue(path[index + 1]), let low = hexValue(path[index + 2]), high << 4 | low == byte {
                return true
            }
            index += 1
        }
        return false
    }

    /// Whether a segment of `path` is `.` or `..` once its escapes are decoded (`%2e%2e`, `.%2E`),
    /// as browsers read them.
    static func hasDotSegment(_ path: ArraySlice<UInt8>) -> Bool {
        percentDecoded(path).split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).contains { segment in
            segment.elementsEqual([UInt8(ascii: ".")]) || segment.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")])
        }
    }

    /// `path` with each well-formed `%XX` escape decoded, and any other `%` kept as it is: a
    /// malformed escape or bytes that are not UTF-8 elsewhere in the path do not stop
    /// `%2e%2e` from being read as `..`.
    private static func percentDecoded(_ path: ArraySlice<UInt8>) -> [UInt8] {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(path.count)
        var index = path.startIndex
        while index < path.endIndex {
            if path[index] == UInt8(ascii: "%"), index + 2 < path.endIndex, let high = hexValue(path[index + 1]), let low = hexValue(path[index + 2])
            {
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(path[index])
                index += 1
            }
        }
        return decoded
    }

    /// An IPv6 address as the URL Standard serializes it: eight groups of lowercase hex without
    /// leading zeros, the first longest run of two or more zero groups written `::`, and no
    /// embedded IPv4 form; `nil` when `text` is not an IPv6 address.
    static func ipv6Literal(_ text: String) -> String? {
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &address) { Array($0) }
        let groups = (0..<8).map { UInt16(bytes[2 * $0]) << 8 | UInt16(bytes[2 * $0 + 1]) }
        var run: (start: Int, length: Int) = (0, 0)
        var start = 0
        while start < 8 {
            var end = start
            while end < 8, groups[end] == 0 { end += 1 }
            if end - start > run.length { run = (start, end - start) }
            start = max(end, start + 1)
        }
        func hex(_ range: Range<Int>) -> String { groups[range].map { String($0, radix: 16) }.joined(separator: ":") }
        guard run.length >= 2 else { return hex(0..<8) }
        return hex(0..<run.start) + "::" + hex((run.start + run.length)..<8)
    }
}
