import Foundation

/// How emails are compared when accounts are matched by email (design §4): trimmed, Unicode
/// NFC, lower-cased, and compared whole. NFC (not NFKC) on purpose: compatibility
/// look-alikes such as full-width letters stay different addresses and never match.
public enum EmailAddress {
    /// The normalized form of `text`, or `nil` when it is not a plausible single address
    /// (no or several `@`, an empty side, spaces or control characters inside): such a value
    /// never matches anything.
    public static func normalized(_ text: String) -> String? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCanonicalMapping.lowercased()
        let parts = trimmed.split(separator: "@", omittingEmptySubsequences: false)
        guard trimmed.count <= 320, parts.count == 2, !parts[0].isEmpty, parts[1].count >= 1,
            !parts[1].hasPrefix("."), !parts[1].hasSuffix("."),
            trimmed.unicodeScalars.allSatisfy({ !CharacterSet.whitespacesAndNewlines.contains($0) && !CharacterSet.controlCharacters.contains($0) })
        else { return nil }
        return trimmed
    }

    /// The profile's email, normalized, when its provider vouches for it (Microsoft only
    /// with `xms_edov`, GitHub only a primary verified `/user/emails` entry, OIDC only with
    /// `email_verified: true`: each provider's mapper decides `emailVerified`).
    public static func verified(of profile: ProviderProfile) -> String? {
        guard profile.emailVerified, let email = profile.email else { return nil }
        return normalized(email)
    }
}
