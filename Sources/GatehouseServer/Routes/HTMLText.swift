import Mustache

/// Text made safe for HTML character data and quoted attribute values, escaped Unicode scalar
/// by Unicode scalar.
///
/// A Swift `Character` is a grapheme cluster: U+0600 (a "prepend" mark) before `<`, or a
/// combining mark after it, makes one character that is not `"<"`, so an escaper that compares
/// characters lets the `<` through — swift-mustache's own HTML escaping does — while the
/// browser's parser reads scalars and sees a tag. A user's display name, a key's name or an
/// account's email written that way would put markup of their choosing on an operator's page.
enum HTMLText {
    /// `text` with `&`, `<`, `>`, `"` and `'` written as character references, and each
    /// explicit directional formatting character (embeddings and overrides U+202A–U+202E,
    /// isolates U+2066–U+2069) as U+FFFD: unclosed, one reorders what follows it on the page, so
    /// that `moc.elpmaxe@…` behind a right-to-left override reads as another address.
    /// Right-to-left text and its marks (U+200E, U+200F) are kept.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\u{202A}"..."\u{202E}", "\u{2066}"..."\u{2069}": out += "\u{FFFD}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// The Mustache content type every console template names in its first line
    /// (`{{% CONTENT_TYPE: GATEHOUSE_HTML }}`): Mustache's HTML escaping, scalar by scalar.
    /// Each template names it, since Mustache starts every partial and parent template on its
    /// own HTML escaping.
    struct ContentType: MustacheContentType {
        /// The name the templates give.
        static let name = "GATEHOUSE_HTML"

        func escapeText(_ text: String) -> String { HTMLText.escape(text) }
    }
}
