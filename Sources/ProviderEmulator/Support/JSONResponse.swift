import Foundation
import Hummingbird

/// Stands for JSON `null` in the `[String: Any]` trees the emulator serializes.
enum NSNullValue {
    /// The `null` value JSONSerialization understands.
    static var null: Any { NSNull() }
}

extension Response {
    /// A JSON response serialized from dictionaries and arrays (`JSONTree`), keeping explicit
    /// `null`s (GitHub's `/user` has `"email": null`, which a synthesized Codable would drop).
    static func json(
        _ object: Any, status: HTTPResponse.Status = .ok, contentType: String = "application/json; charset=utf-8",
        headers: HTTPFields = [:]
    ) -> Response {
        let data = JSONTree.data(object) ?? Data("{}".utf8)
        var fields = headers
        fields[.contentType] = contentType
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// A plain response with the given content type.
    static func text(_ text: String, status: HTTPResponse.Status = .ok, contentType: String = "text/plain; charset=utf-8", headers: HTTPFields = [:])
        -> Response
    {
        var fields = headers
        fields[.contentType] = contentType
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// A `302 Found` to the location.
    static func redirect(to location: String) -> Response {
        Response(status: .found, headers: [.location: location, .cacheControl: "no-store"])
    }
}

/// Reads `application/x-www-form-urlencoded` text (`+` is a space) into ordered pairs.
enum FormEncoding {
    /// Decodes a query string or form body; the first value of a repeated key wins in `dictionary`.
    static func decode(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = unescape(parts[0])
            let value = parts.count > 1 ? unescape(parts[1]) : ""
            if result[key] == nil { result[key] = value }
        }
        return result
    }

    /// Encodes pairs for a query string or form body.
    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func escape(_ text: String) -> String {
        // Codes, ids and most values need no escaping: spare them Foundation's pass.
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

    private static func unescape(_ text: Substring) -> String {
        // Most values have nothing to unescape: spare them two passes through NSString.
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else { return String(text) }
        let spaced = text.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }
}

extension Request {
    /// The query parameters, decoded as a form (`+` is a space).
    var formQuery: [String: String] { FormEncoding.decode(uri.query ?? "") }

    /// The body decoded as a form, bounded in size.
    mutating func formBody() async throws -> [String: String] {
        let buffer = try await collectBody(upTo: 64 << 10)
        return FormEncoding.decode(String(buffer: buffer))
    }
}
