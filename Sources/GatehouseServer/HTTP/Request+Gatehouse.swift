import Foundation
import GatehouseCore
import Hummingbird

extension Request {
    /// The query string as ordered, form-decoded pairs.
    var queryPairs: [(String, String)] { FormEncoding.decode(uri.query ?? "") }

    /// The first value of each query parameter.
    var queryDictionary: [String: String] { Dictionary(queryPairs, uniquingKeysWith: { first, _ in first }) }

    /// A cookie's value, if sent.
    func cookie(_ name: String) -> String? { cookies[name]?.value }

    /// Whether the caller prefers JSON to a redirect.
    var wantsJSON: Bool { (headers[.accept] ?? "").contains("application/json") }
}
