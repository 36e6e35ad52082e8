import Foundation
import HTTPTypes
import Hummingbird

/// The error shapes of the Microsoft identity platform (providers.md §1.3) and Graph (§2.3).
enum MicrosoftErrors {
    /// `AADSTSnnn: text` plus the trace, correlation and timestamp lines Microsoft appends.
    static func description(
        _ code: Int, _ text: String, trace: String = UUID().uuidString.lowercased(), correlation: String = UUID().uuidString.lowercased()
    )
        -> String
    {
        "AADSTS\(code): \(text)\r\nTrace ID: \(trace)\r\nCorrelation ID: \(correlation)\r\nTimestamp: \(timestamp())"
    }

    static func uri(_ code: Int) -> String { "https://login.microsoftonline.com/error?code=\(code)" }

    /// `YYYY-MM-DD HH:MM:SSZ`.
    static func timestamp() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss'Z'"
        return formatter.string(from: Date())
    }

    /// A token-endpoint error: HTTP 400 (401 for `invalid_client`) with `error_codes` as integers.
    static func token(_ error: String, _ code: Int, _ text: String, status: HTTPResponse.Status = .badRequest) -> Response {
        let trace = UUID().uuidString.lowercased()
        let correlation = UUID().uuidString.lowercased()
        return Response.json(
            [
                "error": error, "error_description": description(code, text, trace: trace, correlation: correlation), "error_codes": [code],
                "timestamp": timestamp(), "trace_id": trace, "correlation_id": correlation, "error_uri": uri(code),
            ], status: status, headers: [.cacheControl: "no-store, no-cache", HTTPField.Name("Pragma")!: "no-cache"])
    }

    /// The sign-in page Microsoft shows for requests it will not redirect.
    static func page(_ message: String) -> Response {
        Response.text(
            "<html><body><h1>Sign in</h1><p>Sorry, but we're having trouble signing you in.</p><p>\(WebText.html(message))</p></body></html>",
            status: .badRequest, contentType: "text/html; charset=utf-8")
    }

    /// `response_mode=form_post`: an auto-submitting form that POSTs the answer to the redirect URI.
    static func formPost(to url: String, _ pairs: [(String, String)]) -> Response {
        let inputs = pairs.map { "<input type=\"hidden\" name=\"\(WebText.html($0.0))\" value=\"\(WebText.html($0.1))\"/>" }.joined()
        return Response.text(
            """
            <html><head><title>Working...</title></head><body onload="document.forms[0].submit()">\
            <form method="POST" name="hiddenform" action="\(WebText.html(url))">\(inputs)<noscript><input type="submit" value="Continue"/></noscript></form>\
            </body></html>
            """, contentType: "text/html; charset=utf-8")
    }

    /// A Graph error: `{"error": {"code", "message", "innerError": {date, request-id, client-request-id}}}`.
    static func graph(_ code: String, _ message: String, status: HTTPResponse.Status, headers: HTTPFields = [:]) -> Response {
        let id = UUID().uuidString.lowercased()
        let date = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: "Z", with: "")
        var fields = headers
        fields[HTTPField.Name("request-id")!] = id
        fields[HTTPField.Name("client-request-id")!] = id
        return Response.json(
            ["error": ["code": code, "message": message, "innerError": ["date": date, "request-id": id, "client-request-id": id]]],
            status: status, headers: fields)
    }
}
