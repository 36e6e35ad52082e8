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
    static func parse(_ text: String) -> ParsedURL? {
        guard text.count <= 2048,
            !text.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F || $0 == "\\" || $0.value > 0x7E })
        else { return nil }
        let lowered = text.lowercased()
        let scheme: String
        if lowered.hasPrefix("https://") {
            scheme = "https"
        } else if lowered.hasPrefix("http://") {
            scheme = "http"
        } else {
            return nil
        }
        let rest = text.dropFirst(scheme.count + 3)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<authorityEnd].lowercased()
        // No user info, no percent-encoding in the authority, no empty host.
        guard !authority.isEmpty, !authority.contains("@"), !authority.contains("%") else { return nil }
        var host = authority
        var port = scheme == "https" ? 443 : 80
        if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]") {
            guard let parsed = Int(authority[authority.index(after: colon)...]), (1...65535).contains(parsed) else { return nil }
            port = parsed
            host = String(authority[..<colon])
        }
        guard !host.isEmpty, host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "[" || $0 == "]" || $0 == ":" })
        else { return nil }
        let afterAuthority = rest[authorityEnd...]
        let pathEnd = afterAuthority.firstIndex { $0 == "?" || $0 == "#" } ?? afterAuthority.endIndex
        let path = String(afterAuthority[..<pathEnd])
        let decodedPath = (path.removingPercentEncoding ?? path).lowercased()
        // Encoded slashes or dots could be re-interpreted by the app; dot segments escape the prefix.
        guard !path.lowercased().contains("%2f"), !path.lowercased().contains("%5c"), !path.contains("//") else { return nil }
        let segments = decodedPath.split(separator: "/", omittingEmptySubsequences: false)
        guard !segments.contains(where: { $0 == "." || $0 == ".." }) else { return nil }
        return ParsedURL(scheme: scheme, host: host, port: port, path: path.isEmpty ? "/" : path)
    }
}
