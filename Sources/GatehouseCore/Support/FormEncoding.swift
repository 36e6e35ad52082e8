import Foundation

/// `application/x-www-form-urlencoded` and query strings.
public enum FormEncoding {
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// Percent-encodes everything but RFC 3986 unreserved characters (spaces become `%20`).
    public static func escape(_ text: String) -> String {
        // Ids and most values need no escaping: spare them Foundation's pass.
        if text.utf8.allSatisfy(isUnreserved) { return text }
        return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// Encodes ordered pairs.
    public static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    /// Decodes into ordered pairs (`+` is a space); malformed escapes are kept literally.
    public static func decode(_ text: String) -> [(String, String)] {
        var pairs: [(String, String)] = []
        forEachPair(text) { pairs.append(($0, $1)) }
        return pairs
    }

    /// The first value of each name, decoded as `decode(_:)` decodes them.
    public static func firstValues(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        forEachPair(text) { name, value in
            if values[name] == nil { values[name] = value }
        }
        return values
    }

    /// Calls `body` with each pair in order: split at `&` (empty parts skipped), then at the
    /// first `=` (none: an empty value). Reads the bytes in place: a query is decoded on most
    /// requests that carry one, and splitting it into arrays first cost more than decoding.
    private static func forEachPair(_ text: String, _ body: (String, String) -> Void) {
        let bytes = text.utf8
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "&")) ?? bytes.endIndex
            if start < end {
                let pair = text[start..<end]
                if let equals = pair.utf8.firstIndex(of: UInt8(ascii: "=")) {
                    body(unescape(pair[..<equals]), unescape(pair[pair.utf8.index(after: equals)...]))
                } else {
                    body(unescape(pair), "")
                }
            }
            start = end == bytes.endIndex ? end : bytes.index(after: end)
        }
    }

    /// A path segment's percent-decoding (`+` stays a plus), or `nil` when an escape is
    /// malformed or the bytes are not UTF-8.
    public static func percentDecoded(_ text: Substring) -> String? {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return String(text) }
        return text.removingPercentEncoding
    }

    private static func unescape(_ text: Substring) -> String {
        // Most values have nothing to unescape: spare them two passes through NSString.
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else { return String(text) }
        let spaced = text.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }
}
