import Foundation

/// How emails are compared when accounts are matched by email (design §4): trimmed, Unicode
/// NFC, lower-cased, and compared whole. NFC (not NFKC) on purpose: compatibility
/// look-alikes such as full-width letters stay different addresses and never match.
public enum EmailAddress {
    /// The normalized form of `text`, or `nil` when it is not a plausible single address
    /// (no or several `@`, an empty side, spaces or control characters inside): such a value
    /// never matches anything.
    public static func normalized(_ text: String) -> String? {
        text.utf8.allSatisfy({ $0 < 0x80 }) ? normalizedASCII(text) : normalizedText(text)
    }

    /// `normalized` for any text: trimmed, canonically composed, lower-cased, then checked. The
    /// bound is in bytes (an address is at most 320 octets), and checked before the work too:
    /// one character may carry any number of combining marks.
    static func normalizedText(_ text: String) -> String? {
        guard text.utf8.count <= 1024 else { return nil }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCanonicalMapping.lowercased()
        let parts = trimmed.split(separator: "@", omittingEmptySubsequences: false)
        guard trimmed.utf8.count <= 320, parts.count == 2, !parts[0].isEmpty, parts[1].count >= 1,
            !parts[1].hasPrefix("."), !parts[1].hasSuffix("."),
            trimmed.unicodeScalars.allSatisfy({ !CharacterSet.whitespacesAndNewlines.contains($0) && !CharacterSet.controlCharacters.contains($0) })
        else { return nil }
        return trimmed
    }

    /// `normalized` for ASCII text, on bytes: the same answer (canonical composition changes
    /// no ASCII; ASCII's white space is tab to carriage return and space, its control
    /// characters those below space and DEL), without `CharacterSet` lookups, which were
    /// a twentieth of a live profile fetch (perf, release build).
    static func normalizedASCII(_ text: String) -> String? {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
        let utf8 = text.utf8
        // An address already in its normalized form (how providers send most, and what every
        // unified profile checks for each link) is checked where it is and answered as it is:
        // no copy of its bytes, no new string.
        if let first = utf8.first, let last = utf8.last, !isSpace(first), !isSpace(last), !utf8.contains(where: { (0x41...0x5A).contains($0) }) {
            return isPlausible(utf8) ? text : nil
        }
        var bytes = Array(utf8)
        while let last = bytes.last, isSpace(last) { bytes.removeLast() }
        let start = bytes.firstIndex { !isSpace($0) } ?? bytes.endIndex
        bytes.removeFirst(start)
        for index in bytes.indices where (0x41...0x5A).contains(bytes[index]) { bytes[index] |= 0x20 }
        guard isPlausible(bytes) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether trimmed, lower-cased ASCII `bytes` are a plausible single address: at most 320
    /// bytes, no spaces or control characters, one `@` with something on each side, and a
    /// domain that neither starts nor ends with a dot.
    private static func isPlausible<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> Bool {
        guard bytes.count <= 320, bytes.allSatisfy({ $0 > 0x20 && $0 != 0x7F }), let at = bytes.firstIndex(of: UInt8(ascii: "@")),
            at != bytes.startIndex, bytes.lastIndex(of: UInt8(ascii: "@")) == at
        else { return false }
        let domain = bytes.index(after: at)
        return domain != bytes.endIndex && bytes[domain] != UInt8(ascii: ".") && bytes.last != UInt8(ascii: ".")
    }

    /// The profile's email, normalized, when its provider vouches for it (Microsoft only
    /// with `xms_edov`, GitHub only a primary verified `/user/emails` entry, OIDC only with
    /// `email_verified: true`: each provider's mapper decides `emailVerified`).
    public static func verified(of profile: ProviderProfile) -> String? {
        guard profile.emailVerified, let email = profile.email else { return nil }
        return normalized(email)
    }
}
