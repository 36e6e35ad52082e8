import Foundation

/// The client id and secret of a token request: HTTP Basic (RFC 6749 §2.3.1, form-encoded
/// parts) when present, otherwise the form body's `client_id` and `client_secret`.
enum ClientCredentials {
    static func of(form: [String: String], authorization: String?) -> (id: String?, secret: String?) {
        if let authorization, authorization.lowercased().hasPrefix("basic "),
            let decoded = Data(base64Encoded: String(authorization.dropFirst(6))).map({ String(decoding: $0, as: UTF8.self) }),
            let colon = decoded.firstIndex(of: ":")
        {
            return (
                String(decoded[..<colon]).removingPercentEncoding, String(decoded[decoded.index(after: colon)...]).removingPercentEncoding
            )
        }
        return (form["client_id"], form["client_secret"])
    }
}
