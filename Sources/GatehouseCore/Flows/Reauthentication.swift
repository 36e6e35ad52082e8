import Foundation

/// What a re-authentication asks a provider and accepts from it, and when a sign-in's user last
/// authenticated at the provider (`SessionRecord.authenticatedAt`, from which the recent-login
/// window counts).
extension SignInService {
    /// A re-authentication's parameters: it proves the user is there, so the provider's own
    /// session in the browser (a machine left signed in) must not answer for them. The
    /// provider's prompt (`login`) and, where its tokens then say when the user authenticated,
    /// `max_age=0` are added; a caller's `prompt` must include the provider's, and its
    /// `max_age` must be `0`.
    static func reauthenticationParameters(_ custom: [(String, String)], provider: any IdentityProvider) throws -> [(String, String)] {
        var custom = custom
        // Every occurrence, in any case: a provider may read the last of a repeated parameter,
        // or read names without regard to case. The gateway's own is added unless the start
        // named the parameter exactly.
        let prompts = custom.filter { $0.0.lowercased() == "prompt" }.map(\.1)
        let maxAges = custom.filter { $0.0.lowercased() == "max_age" }.map(\.1)
        if let prompt = provider.reauthenticationPrompt {
            guard prompts.allSatisfy({ $0.split(separator: " ").contains(Substring(prompt)) }) else {
                throw GatehouseError(
                    code: .invalidCustomParameter,
                    detail: "A re-authentication asks the provider for the credentials again: its prompt must include \(prompt).")
            }
            if !custom.contains(where: { $0.0 == "prompt" }) { custom.append(("prompt", prompt)) }
        }
        guard maxAges.allSatisfy({ $0 == "0" }) else {
            throw GatehouseError(
                code: .invalidCustomParameter, detail: "A re-authentication asks the provider for the credentials again: its max_age must be 0.")
        }
        if provider.acceptsMaxAge, !custom.contains(where: { $0.0 == "max_age" }) { custom.append(("max_age", "0")) }
        return custom
    }

    /// When the user authenticated at the provider for an ID token the provider has just issued
    /// (a redirect's code exchange, at `receivedAt` on the gateway's clock): as long before
    /// `receivedAt` as its `auth_time` is before its `iat`, so that neither clock's error counts.
    /// `receivedAt` itself for a token without `auth_time` (taken at its word: it was sent the
    /// prompt), and for a provider without ID tokens (GitHub). A sign-in that the provider's own
    /// session in the browser answered carries that session's `auth_time`: no recent login.
    static func authenticationTime(_ claims: IDTokenClaims?, receivedAt: Date) -> Date {
        guard let claims, let authTime = claims.authTime, authTime.isFinite, claims.issuedAt.isFinite else { return receivedAt }
        return receivedAt.addingTimeInterval(-max(0, claims.issuedAt - authTime))
    }

    /// Refuses a re-authentication the provider answered from an earlier sign-in: the
    /// authentication its ID token reports (`authenticationTime`) is before the flow started
    /// (`authenticationTimeSkew` allowed), or the token does not say when it was, from a provider
    /// that was asked with `max_age` (`acceptsMaxAge`), whose tokens must then say it (OpenID
    /// Connect Core §2): the browser carries the provider URL, and whoever holds it can leave
    /// `max_age` and the prompt out. A provider without ID tokens (GitHub), or one not asked with
    /// `max_age` whose token does not say (Microsoft's `auth_time` is an optional claim), is taken
    /// at its word: it was sent the prompt.
    static func requireFreshAuthentication(
        _ claims: IDTokenClaims?, authenticatedAt: Date, provider: any IdentityProvider, startedAt: Date
    ) throws {
        if let claims, claims.authTime == nil, provider.acceptsMaxAge {
            throw GatehouseError.requiresRecentLogin(
                detail: "\(provider.id)'s ID token does not say when the user signed in (auth_time): the re-authentication proves nothing.")
        }
        guard authenticatedAt >= startedAt.addingTimeInterval(-Self.authenticationTimeSkew) else {
            throw GatehouseError.requiresRecentLogin(
                detail:
                    "\(provider.id) answered from an earlier sign-in (its ID token's auth_time is before this re-authentication started) instead of asking for the credentials again; re-authenticate again."
            )
        }
    }

    /// A session's `authenticatedAt` from the one its sign-in reported: never later than `now`,
    /// nor earlier than `oldestAuthentication` before it (a provider's token may say anything,
    /// and every store and token must hold the time), else `now`.
    static func sessionAuthenticationTime(_ reported: Date?, now: Date) -> Date {
        guard let reported, reported.timeIntervalSince1970.isFinite else { return now }
        return max(now.addingTimeInterval(-Self.oldestAuthentication), min(now, reported))
    }

    /// How long before a sign-in its authentication may be recorded: older is recorded as this
    /// old, which is no recent login either.
    static let oldestAuthentication: TimeInterval = 366 * 86_400

    /// How much older than its flow a re-authentication's authentication may be: the time
    /// between the provider's authentication and its token's issue that is not the user's.
    static let authenticationTimeSkew: TimeInterval = 60
}
