import HTTPTypes

/// The header names the gateway uses that HTTPTypes does not name, in one place.
extension HTTPField.Name {
    /// `Referrer-Policy`.
    static let referrerPolicy = named("Referrer-Policy")
    /// `X-Forwarded-For` (trusted only from configured proxies).
    static let xForwardedFor = named("X-Forwarded-For")
    /// `Sec-Fetch-Site` (cross-site checks).
    static let secFetchSite = named("Sec-Fetch-Site")
    /// `X-Request-Id` (accepted when sane, always answered).
    static let xRequestID = named("X-Request-Id")
    /// `Warning` (stale answers, RFC 7234's 110).
    static let warning = named("Warning")

    /// A name from one of the literals above, all valid tokens: the check cannot fail at run time.
    private static func named(_ literal: StaticString) -> Self {
        guard let name = Self("\(literal)") else { preconditionFailure("\(literal) is not an HTTP field name") }
        return name
    }
}
