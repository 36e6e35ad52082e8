import Foundation

/// Rewrites the paging links of a provider's answer so that they point at the gateway's
/// passthrough route instead of the provider: a caller pages on without ever holding the
/// provider's token. Only links under the provider's API base are rewritten; any other URL is
/// left as it is (following it reaches the provider without a token, which is harmless).
public struct PagingLinks: Sendable {
    /// The provider's API base (`https://graph.microsoft.com`), without a trailing `/`.
    public let providerBase: String
    /// The passthrough route's base (`https://gw.example.com/v1/users/u1/providers/microsoft.com/api`).
    public let gatewayBase: String

    /// Rewrites from `providerBase` to `gatewayBase`.
    public init(providerBase: String, gatewayBase: String) {
        self.providerBase = providerBase
        self.gatewayBase = gatewayBase
    }

    /// The URL moved under the gateway, or `nil` when it is not under the provider's base.
    public func rewrite(_ url: String) -> String? {
        guard url.hasPrefix(providerBase), let next = url.dropFirst(providerBase.count).first, next == "/" || next == "?" else {
            return nil
        }
        return gatewayBase + url.dropFirst(providerBase.count)
    }

    /// An RFC 8288 `Link` header (GitHub's paging) with every `<url>` under the base rewritten.
    public func rewriteLinkHeader(_ value: String) -> String {
        var out = ""
        var rest = Substring(value)
        while let open = rest.firstIndex(of: "<"), let close = rest[open...].firstIndex(of: ">") {
            out += rest[..<open]
            let url = String(rest[rest.index(after: open)..<close])
            out += "<" + (rewrite(url) ?? url) + ">"
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }

    /// The JSON members that carry Graph's (OData's) paging links.
    static let odataMembers = ["\"@odata.nextLink\"", "\"@odata.deltaLink\""]

    /// A JSON body with the string values of `@odata.nextLink` and `@odata.deltaLink` rewritten
    /// (in place: everything else stays byte for byte); `nil` when nothing changed.
    public func rewriteODataLinks(_ body: [UInt8]) -> [UInt8]? {
        var result = body
        var changed = false
        for member in Self.odataMembers {
            let key = Array(member.utf8)
            var searchFrom = 0
            while let keyStart = Self.find(key, in: result, from: searchFrom) {
                searchFrom = keyStart + key.count
                guard let (start, end) = Self.stringValue(after: searchFrom, in: result),
                    let url = try? JSONDecoder().decode(String.self, from: Data(result[start..<end])), let moved = rewrite(url),
                    let encoded = try? Self.encoder.encode(moved)
                else { continue }
                result.replaceSubrange(start..<end, with: encoded)
                searchFrom = start + encoded.count
                changed = true
            }
        }
        return changed ? result : nil
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard needle.count <= haystack.count, start <= haystack.count - needle.count else { return nil }
        var index = start
        while index <= haystack.count - needle.count {
            if haystack[index] == needle[0], Array(haystack[index..<index + needle.count]) == needle { return index }
            index += 1
        }
        return nil
    }

    /// The range of the JSON string (quotes included) that is the value after a member name:
    /// whitespace, `:`, whitespace, then `"…"` with escapes honoured.
    private static func stringValue(after index: Int, in bytes: [UInt8]) -> (Int, Int)? {
        var i = index
        func skipSpace() { while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 } }
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
        i += 1
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { return nil }
        let start = i
        i += 1
        while i < bytes.count {
            switch bytes[i] {
            case UInt8(ascii: "\\"): i += 2
            case UInt8(ascii: "\""): return (start, i + 1)
            default: i += 1
            }
        }
        return nil
    }
}
