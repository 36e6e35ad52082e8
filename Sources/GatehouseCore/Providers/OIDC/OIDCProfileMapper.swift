/// Standard claims → `ProviderProfile` (design §3): userinfo wins over the ID token for
/// each claim; an email counts as verified only when `email_verified` is true.
enum OIDCProfileMapper {
    /// The profile of a sign-in (ID-token claims, optionally completed by userinfo).
    static func profile(providerId: String, claims: IDTokenClaims, userInfo: JSONValue?) -> ProviderProfile {
        profile(providerId: providerId, subject: claims.subject, claims: claims, userInfo: userInfo)
    }

    /// The profile for `subject` from whichever sources are present.
    static func profile(providerId: String, subject: String, claims: IDTokenClaims?, userInfo: JSONValue?) -> ProviderProfile {
        func text(_ key: String, _ fallback: String?) -> String? {
            userInfo?[key]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } ?? fallback
        }
        let email = text("email", claims?.email)
        // The verified flag belongs to the source the email came from.
        let verified: Bool
        if let infoEmail = userInfo?["email"]?.stringValue, infoEmail == email {
            verified = userInfo?["email_verified"]?.boolValue ?? (userInfo?["email_verified"]?.stringValue?.lowercased() == "true")
        } else {
            verified = email != nil && claims?.email == email && claims?.emailVerified == true
        }
        // Userinfo's members as they came, each claim of the ID token only where userinfo has
        // none: without claims (a refreshed profile) the members are the parsed answer's own
        // dictionary, not a copy, so the profiles of one repeated answer (`parseRepeated`) share
        // it and compare equal by identity when the answer's JSON is reused (`EncodedAnswers`).
        var raw: [String: JSONValue] = [:]
        if case .object(let info)? = userInfo { raw = info }
        if let claims {
            for (key, value) in [
                ("sub", claims.subject), ("name", claims.name), ("given_name", claims.givenName), ("family_name", claims.familyName),
                ("email", claims.email), ("preferred_username", claims.preferredUsername), ("picture", claims.picture),
                ("locale", claims.locale),
            ] where raw[key] == nil {
                if let value { raw[key] = .string(value) }
            }
            if raw["email_verified"] == nil, let flag = claims.emailVerified { raw["email_verified"] = .bool(flag) }
        }
        return ProviderProfile(
            providerId: providerId, federatedId: subject, username: text("preferred_username", claims?.preferredUsername),
            displayName: text("name", claims?.name), givenName: text("given_name", claims?.givenName),
            familyName: text("family_name", claims?.familyName), email: email, emailVerified: email != nil && verified,
            photoSourceURL: text("picture", claims?.picture), locale: text("locale", claims?.locale), rawUserInfo: .object(raw))
    }
}
