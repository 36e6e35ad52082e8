import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird
import Mustache

/// The console's templates (`Resources/console/*.mustache`, escaped scalar by scalar:
/// ``HTMLText``) and its stylesheet, loaded once at start.
struct ConsoleViews: Sendable {
    private let library: MustacheLibrary
    /// `console.css`.
    let stylesheet: String

    /// The notices a page shows after a change (`?notice=<key>`): a fixed set, so a link
    /// cannot put words of its own on a console page.
    static let notices = [
        "disabled": "The account is disabled and its sessions have ended.", "enabled": "The account is enabled.",
        "claims-saved": "The custom claims are saved; the next ID token carries them.", "session-revoked": "The session has ended.",
        "sessions-revoked": "Every session of the account has ended.", "unlinked": "The provider is unlinked.",
        "deleted": "The account is deleted.", "key-revoked": "The key is revoked.", "redelivered": "The event is due again now.",
    ]

    /// The first line of every template: ``HTMLText/ContentType``'s pragma.
    static let contentTypeLine = "{{% CONTENT_TYPE: \(HTMLText.ContentType.name) }}"

    /// Loads the templates from the module's resources; throws when one does not name
    /// ``HTMLText/ContentType`` in its first line.
    init() throws {
        guard let folder = Bundle.module.url(forResource: "console", withExtension: nil, subdirectory: "Resources") else {
            throw GatehouseError(code: .internal, detail: "The console's templates are missing from the build.")
        }
        // Before the templates are parsed: each names this content type in its first line.
        MustacheContentTypes.register(HTMLText.ContentType(), named: HTMLText.ContentType.name)
        var library = MustacheLibrary()
        for name in ["layout", "events", "entry", "message", "users", "user", "keys", "webhooks", "activity"] {
            let text = try String(contentsOf: folder.appendingPathComponent("\(name).mustache"), encoding: .utf8)
            // Without it, Mustache's own escaping, which compares characters, would apply.
            guard text.utf8.starts(with: Self.contentTypeLine.utf8) else {
                throw GatehouseError(code: .internal, detail: "The console template \(name) does not start with \(Self.contentTypeLine).")
            }
            try library.register(text, named: name)
        }
        self.library = library
        stylesheet = try String(contentsOf: folder.appendingPathComponent("console.css"), encoding: .utf8)
    }

    /// Page `name` rendered with `values`, the operator's name in the header and the notice
    /// the request names, as an HTML answer.
    func render(
        _ name: String, _ values: [String: Any], operator who: ConsoleRoutes.Operator? = nil, request: Request? = nil,
        status: HTTPResponse.Status = .ok
    ) -> Response {
        var values = values
        if let who { values["operator"] = who.label }
        if let key = request?.queryDictionary["notice"], let notice = Self.notices[key] { values["notice"] = notice }
        let html = library.render(values, withTemplate: name) ?? "<!doctype html><p>The console page \(name) is missing.</p>"
        return Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8"], body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }
}
