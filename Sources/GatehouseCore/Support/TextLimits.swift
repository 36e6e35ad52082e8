extension StringProtocol {
    /// The text cut to at most `limit` bytes of UTF-8, at a Unicode scalar's boundary.
    ///
    /// Limits on text that a client, a provider or a hook sent count bytes, never `Character`s:
    /// a character is a grapheme cluster, and one letter followed by any number of combining
    /// marks is one character, so `prefix(256)` keeps a User-Agent of 76 KB whole.
    public func truncated(toBytes limit: Int) -> String {
        let text = Substring(self)
        let bytes = text.utf8
        guard bytes.count > limit else { return String(text) }
        var end = bytes.index(bytes.startIndex, offsetBy: Swift.max(0, limit))
        // Back to the first byte of a scalar (continuation bytes are 0b10xxxxxx).
        while end > bytes.startIndex, bytes[end] & 0xC0 == 0x80 { end = bytes.index(before: end) }
        return String(decoding: bytes[bytes.startIndex..<end], as: UTF8.self)
    }

    /// Plain text to show a person (a page, an app's dialog): control characters, bidirectional
    /// controls (an override would reorder the words around it) and other invisible format
    /// characters (a zero-width space would make `ada@exa​mple.com` look like another address)
    /// removed, except the joiners some scripts spell with; tabs, line breaks and line and
    /// paragraph separators read as spaces; trimmed; at most `characters` characters and `bytes` bytes of UTF-8 (one
    /// character may hold any number of combining marks).
    public func displayable(characters: Int, bytes: Int) -> String {
        var kept = String.UnicodeScalarView()
        for scalar in unicodeScalars {
            if scalar.showsAsItself {
                kept.append(scalar)
            } else if scalar == "\t" || scalar == "\n" || scalar == "\r"
                || [.lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory)
            {
                kept.append(" ")
            }
        }
        var text = String(kept).trimmingCharacters(in: .whitespaces)
        if text.count > characters { text = String(text.prefix(characters)) }
        return text.truncated(toBytes: bytes)
    }
}

extension Unicode.Scalar {
    /// Whether the scalar shows as itself in plain text, where `displayable` keeps it: not a
    /// control character, a bidirectional control, another invisible format character (the
    /// joiners some scripts spell with excepted), nor a line or paragraph separator.
    public var showsAsItself: Bool {
        switch properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: false
        case .format: self == "\u{200C}" || self == "\u{200D}"
        default: !properties.isBidiControl
        }
    }
}
