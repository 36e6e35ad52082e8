import Foundation

/// Rewrites the paging links of a provider's answer so that they point at the gateway's
/// passthrough route instead of the provider: a caller pages on without ever holding the
/// provider's token.
///
/// A link is rewritten only when it is under the provider's API base and its remainder is an
/// API path the operator's policy allows (`allows`), parsed as every passthrough path is (no dot
/// segments, no encoded slashes). Every other link is dropped, never passed on: a client that
/// follows `next` sends its own credentials (a service key, a gateway ID token) to wherever the
/// link points, so a link to another host — or one that would leave the API route once joined
/// under the gateway — must not reach it.
public struct PagingLinks: Sendable {
    /// The provider's API base (`https://graph.microsoft.com`), without a trailing `/`.
    public let providerBase: String
    /// The passthrough route's base (`https://gw.example.com/v1/users/u1/providers/microsoft.com/api`).
    public let gatewayBase: String
    /// Whether the policy allows a `GET` of this API path with this raw query (without `?`).
    let allows: @Sendable (APIPath, Substring?) -> Bool

    /// The most links one answer has rewritten; any further one is dropped. A page has one or
    /// two; the cap bounds the work a hostile answer can cause.
    public static let maximumRewrites = 100

    /// Rewrites from `providerBase` to `gatewayBase` the links whose path and query `allows` accepts.
    public init(providerBase: String, gatewayBase: String, allows: @escaping @Sendable (APIPath, Substring?) -> Bool) {
        self.providerBase = providerBase
        self.gatewayBase = gatewayBase
        self.allows = allows
    }

    /// The URL moved under the gateway, or `nil` when it must not reach the caller (another
    /// host, a path outside the policy, a fragment, a query a URL cannot carry).
    public func rewrite(_ url: String) -> String? {
        guard url.hasPrefix(providerBase) else { return nil }
        let rest = url.dropFirst(providerBase.count)
        // Printable ASCII only, as a URL is written: then every search below is a search of
        // bytes. A character search compares grapheme clusters, and a `#` or `?` followed by a
        // combining mark (raw U+0338, say) would not be found.
        guard rest.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), rest.first == "/", !rest.utf8.contains(UInt8(ascii: "#")) else {
            return nil
        }
        let rawPath: Substring
        var query: Substring?
        if let mark = rest.firstIndex(of: "?") {
            rawPath = rest[..<mark]
            query = rest[rest.index(after: mark)...]
        } else {
            rawPath = rest
        }
        if let query {
            // The same rule as a caller's query, and nothing that would end a quoted JSON string
            // or a `<…>` link target.
            guard query.utf8.count <= 4096,
                !query.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value >= 0x7F || "\"\\<>".unicodeScalars.contains($0) }),
                !Self.carriesCredential(query)
            else { return nil }
        }
        // A link the caller could not follow (its query names a parameter the path's template
        // does not take) is dropped like any other.
        guard let path = try? APIPath(raw: rawPath), allows(path, query) else { return nil }
        return gatewayBase + path.encoded + (query.map { "?" + $0 } ?? "")
    }

    /// Query parameters that carry a credential in the APIs that sign or authorize their links
    /// (OAuth's `access_token`, signed URLs' `sig` and `X-Amz-Signature`, API keys), compared
    /// decoded and without case. A paging link that names one is dropped: rewritten, it would
    /// hand the credential to whoever reads the answer, a browser included.
    static let credentialParameters: Set<String> = [
        "access_token", "refresh_token", "id_token", "token", "code", "client_secret", "password", "api_key", "apikey", "key", "sig",
        "signature", "tempauth", "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature", "x-goog-credential",
    ]

    /// Whether a raw query names one of `credentialParameters`, its parameters split and their
    /// names read as the policy reads a caller's (`APITemplate.refusedParameter`: at `&` and
    /// `;`, decoded, without case, a leading `$` or a `[…]` suffix); a name that reads as none
    /// counts as one, since a server reading it otherwise might find a credential in it.
    static func carriesCredential(_ query: Substring) -> Bool {
        query.split(whereSeparator: { $0 == "&" || $0 == ";" }).contains { pair in
            let raw = pair.prefix { $0 != "=" }
            guard !raw.isEmpty else { return false }
            guard let name = APITemplate.parameterName(raw) else { return true }
            return credentialParameters.contains(name)
        }
    }

    /// An RFC 8288 `Link` header (GitHub's paging) with every link under the base rewritten and
    /// every other one dropped; `nil` when no link is left.
    ///
    /// Read as bytes, as the caller's parser reads it: compared as `Character`s, a `<` or `,`
    /// that shares a grapheme cluster with the scalar before it (U+0600) or after it (a
    /// combining mark) would not be seen, and a target smuggled among a link's parameters
    /// would pass.
    public func rewriteLinkHeader(_ value: String) -> String? {
        let bytes = Array(value.utf8)
        let (open, close, comma, quote) = (UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: ","), UInt8(ascii: "\""))
        var kept: [String] = []
        var position = 0
        while kept.count < Self.maximumRewrites, let start = bytes[position...].firstIndex(of: open),
            let end = bytes[start...].firstIndex(of: close)
        {
            let url = String(decoding: bytes[(start + 1)..<end], as: UTF8.self)
            // The link's parameters run to the next comma outside a quoted string.
            var index = end + 1
            var quoted = false
            while index < bytes.count, quoted || bytes[index] != comma {
                if bytes[index] == quote { quoted.toggle() }
                index += 1
            }
            let parameters = bytes[(end + 1)..<index]
            // Parameters carry no URL: a `<…>` among them is what a lenient parser would take
            // for the link's target, so the whole link goes; so do controls and non-ASCII.
            if let moved = rewrite(url), !parameters.contains(where: { $0 == open || $0 == close || $0 < 0x20 || $0 >= 0x7F }) {
                kept.append("<" + moved + ">" + String(decoding: parameters, as: UTF8.self))
            }
            position = min(index + 1, bytes.count)
        }
        return kept.isEmpty ? nil : kept.joined(separator: ", ")
    }

    /// The JSON member names that carry Graph's (OData's) paging links, decoded: OData 4.0's,
    /// and 4.01's short forms, which a client library may follow too.
    static let odataMembers: Set<String> = ["@odata.nextLink", "@odata.deltaLink", "@nextLink", "@deltaLink"]
    /// `odataMembers` as UTF-8.
    private static let odataMemberBytes = odataMembers.map { Array($0.utf8) }

    /// A JSON body with the string values of `@odata.nextLink` and `@odata.deltaLink` members
    /// rewritten, or `null` where the link may not reach the caller; everything else stays byte
    /// for byte. One pass over the body (strings are skipped whole, so a member name inside a
    /// string value is not one); `nil` when nothing changed.
    public func rewriteODataLinks(_ body: [UInt8]) -> [UInt8]? {
        body.withUnsafeBufferPointer { bytes -> [UInt8]? in
            var out: [UInt8] = []
            var copied = 0
            var rewrites = 0
            var index = 0
            while index < bytes.count {
                guard bytes[index] == Self.quote else {
                    index += 1
                    continue
                }
                guard let end = Self.stringEnd(from: index, in: bytes) else { break }
                guard Self.isPagingMember(bytes, index, end), let (start, valueEnd) = Self.stringValue(after: end, in: bytes) else {
                    index = end
                    continue
                }
                var replacement = Array("null".utf8)
                if rewrites < Self.maximumRewrites, let url = Self.decodeString(UnsafeBufferPointer(rebasing: bytes[start..<valueEnd])),
                    let moved = rewrite(url)
                {
                    // `rewrite` lets nothing through that JSON would need to escape.
                    replacement = [Self.quote] + Array(moved.utf8) + [Self.quote]
                    rewrites += 1
                }
                if out.isEmpty { out.reserveCapacity(bytes.count + 256) }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copied..<start]))
                out.append(contentsOf: replacement)
                copied = valueEnd
                index = valueEnd
            }
            guard copied > 0 else { return nil }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copied...]))
            return out
        }
    }

    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    /// The index after the closing quote of the JSON string opening at `start`.
    private static func stringEnd(from start: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var index = start + 1
        while index < bytes.count {
            switch bytes[index] {
            case backslash: index += 2
            case quote: return index + 1
            default: index += 1
            }
        }
        return nil
    }

    /// Whether the JSON string `bytes[start..<end]` (quotes included) is one of `odataMembers`
    /// once decoded (`\u004c` is an `L` to every JSON parser, so it is one here too). Strings
    /// without `@` cannot be one and are not decoded.
    private static func isPagingMember(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        guard end - start <= 128 else { return false }
        let literal = UnsafeBufferPointer(rebasing: bytes[start..<end])
        let at = UInt8(ascii: "@")
        if !literal.contains(backslash) {
            // The annotation itself (`@odata.nextLink`) or one on a property (`members@odata.nextLink`,
            // the next page of an expanded collection): from the name's last `@`.
            // Compared as bytes: every string of the body holding an `@` (an email) comes here.
            guard literal.count > 2, let last = literal.lastIndex(of: at) else { return false }
            let name = UnsafeBufferPointer(rebasing: literal[last..<literal.count - 1])
            return odataMemberBytes.contains { $0.elementsEqual(name) }
        }
        guard let name = decodeString(literal), let last = name.lastIndex(of: "@") else { return false }
        return odataMembers.contains(String(name[last...]))
    }

    /// The range of the JSON string (quotes included) that is the value after a member name:
    /// whitespace, `:`, whitespace, then `"…"` with escapes honoured.
    private static func stringValue(after index: Int, in bytes: UnsafeBufferPointer<UInt8>) -> (Int, Int)? {
        var i = index
        func skipSpace() { while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 } }
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
        i += 1
        skipSpace()
        guard i < bytes.count, bytes[i] == quote, let end = stringEnd(from: i, in: bytes) else { return nil }
        return (i, end)
    }

    /// A JSON string literal's text: `\/` (how Graph writes slashes) by hand, anything else
    /// escaped through Foundation's decoder.
    private static func decodeString(_ literal: UnsafeBufferPointer<UInt8>) -> String? {
        let inner = UnsafeBufferPointer(rebasing: literal[1..<literal.count - 1])
        var text: [UInt8] = []
        text.reserveCapacity(inner.count)
        var index = 0
        while index < inner.count {
            let byte = inner[index]
            if byte == backslash {
                guard index + 1 < inner.count, inner[index + 1] == UInt8(ascii: "/") else {
                    return (try? JSONSerialization.jsonObject(with: Data(literal), options: .fragmentsAllowed)) as? String
                }
                text.append(UInt8(ascii: "/"))
                index += 2
            } else {
                text.append(byte)
                index += 1
            }
        }
        return String(decoding: text, as: UTF8.self)
    }
}
