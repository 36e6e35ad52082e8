import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird

extension Request {
    /// The query string as ordered, form-decoded pairs.
    var queryPairs: [(String, String)] { FormEncoding.decode(uri.query ?? "") }

    /// The first value of each query parameter.
    var queryDictionary: [String: String] { FormEncoding.firstValues(uri.query ?? "") }

    /// A cookie's value, if sent: the first cookie of that name in the `Cookie` fields, read as
    /// Hummingbird's `Cookies` reads them, without building every cookie of the request (that
    /// was a twentieth of a cookie-authenticated `/v1/me`).
    func cookie(_ name: String) -> String? {
        for field in headers where field.name == .cookie {
            if let value = Self.cookieValue(named: name, in: field.value) { return value }
        }
        return nil
    }

    /// The value of cookie `name` in one `Cookie` field value (`a=1; b=2`): pairs split at `;`,
    /// leading spaces and tabs dropped, the name before the first `=`, the value after it as sent
    /// (`nil` when empty).
    static func cookieValue(named name: String, in field: String) -> String? {
        let bytes = field.utf8
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: ";")) ?? bytes.endIndex
            var pairStart = start
            while pairStart < end, bytes[pairStart] == UInt8(ascii: " ") || bytes[pairStart] == UInt8(ascii: "\t") {
                pairStart = bytes.index(after: pairStart)
            }
            if let equals = bytes[pairStart..<end].firstIndex(of: UInt8(ascii: "=")), bytes[pairStart..<equals].elementsEqual(name.utf8) {
                // An empty value is no cookie (as for Hummingbird), and ends the search.
                let value = field[bytes.index(after: equals)..<end]
                return value.isEmpty ? nil : String(value)
            }
            start = end == bytes.endIndex ? end : bytes.index(after: end)
        }
        return nil
    }

    /// A field's value as `HTTPFields`' subscript reads it, every field of the name joined, but
    /// without a copy when there is one: the subscript joins through a lazy map whatever the
    /// count, a new string for each service key and ID token a request presents (perf: about
    /// half a microsecond of a passthrough call, with the generic metadata it looks up).
    func field(_ name: HTTPField.Name) -> String? {
        var found: String?
        for field in headers where field.name == name {
            guard found == nil else { return headers[name] }
            found = field.value
        }
        return found
    }

    /// Whether the caller prefers JSON to a redirect.
    var wantsJSON: Bool { (headers[.accept] ?? "").contains("application/json") }
}
