import Hummingbird

/// Small text helpers shared by the emulated authorize pages and redirects.
enum WebText {
    /// `url` with `pairs` appended to its query.
    static func append(to url: String, _ pairs: [(String, String)]) -> String {
        url + (url.contains("?") ? "&" : "?") + FormEncoding.encode(pairs)
    }

    /// `text` escaped for HTML content and attribute values.
    static func html(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}

extension Request {
    /// `http://<Host>` as the client reached the emulator: issuers and links are built from it.
    var baseURL: String { "http://\(head.authority ?? "127.0.0.1")" }
}
