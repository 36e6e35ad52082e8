import Foundation

/// A one-time start URL an app obtains with its bearer token and opens in the system browser.
///
/// A native app holds the gateway's tokens, not a cookie, and its bearer token cannot travel
/// into the browser; a link or re-authentication started by the app's own HTTP client would
/// leave the transaction cookie outside the browser. So the app asks for a start URL carrying
/// its parameters and its account, valid once and for two minutes; the browser opening it
/// starts the flow as that account. The flow's result is bound to the app's verifier
/// (`result_challenge` is required), and its return is the app's, through the consent page.
public struct AppStartLink: Sendable, Encodable {
    /// `<public URL>/v1/auth/<provider>/start?start_token=…`.
    public var url: String
    /// Seconds until it can no longer be opened.
    public var expiresIn: Int
}

/// What a start URL stands for, stored as a one-time entry of the results table.
struct PendingStart: Codable {
    var providerId: String
    var uid: String
    /// The session that made it (`sid`): the URL dies with it. Absent from a start stored by
    /// an earlier version, which is then taken without that check.
    var familyId: String?
    /// The start's parameters, in order.
    var query: [[String]]
}

extension SignInService {
    /// How long a start URL can be opened.
    static let startLinkLifetime: TimeInterval = 120

    /// The store key of a start URL's token.
    static func startKey(_ token: String) -> String {
        SecureRandom.digest("app-start|\(token)")
    }

    /// A start URL for the signed-in account `uid`, made by its session `familyId`, checked now
    /// as `start` would check it (a native or desktop `return_to`, `result_challenge`, the mode,
    /// custom parameters); the HTTP layer has already required a recent login for `link`.
    public func makeStartLink(providerId: String, parameters: [(String, String)], uid: String, familyId: String) async throws
        -> AppStartLink
    {
        let provider = try providers.provider(providerId)
        let values = Dictionary(parameters, uniquingKeysWith: { first, _ in first })
        guard values["start_token"] == nil else { throw GatehouseError.invalidArgument("start_token cannot be a start parameter.") }
        guard let returnTo = values["return_to"] else { throw GatehouseError.invalidReturnTo("return_to is required.") }
        guard try returnToPolicy.check(returnTo).isNative else {
            throw GatehouseError.invalidReturnTo("Start URLs are for native and desktop apps: return_to must be an app's scheme or loopback address.")
        }
        _ = try ResultBinding.challenge(values["result_challenge"], required: true)
        let mode = try SignInMode(parameter: values["mode"])
        _ = try await checkMode(mode, providerId: provider.id, signedInUid: uid)
        _ = try CustomParameters.forwardable(from: parameters)
        _ = try Self.extraScopes(values["scope"])
        let token = SecureRandom.token()
        let pending = PendingStart(providerId: provider.id, uid: uid, familyId: familyId, query: parameters.map { [$0.0, $0.1] })
        try await storage.insertResult(
            idHash: Self.startKey(token), payload: try JSONCoding.encoder().encode(pending),
            expiresAt: configuration.clock.now().addingTimeInterval(Self.startLinkLifetime))
        return AppStartLink(
            url: "\(configuration.publicURL)/v1/auth/\(FormEncoding.escape(provider.id))/start?start_token=\(token)",
            expiresIn: Int(Self.startLinkLifetime))
    }

    /// Takes a start URL's token (once): its parameters and account. Unknown, used, expired,
    /// another provider's, or made by a session that has ended since (signed out, revoked, the
    /// account disabled): `invalid-state`.
    public func takeStartLink(token: String, providerId: String) async throws -> (query: [(String, String)], owner: FlowOwner) {
        guard !token.isEmpty, token.utf8.count <= 128 else { throw GatehouseError.invalidState("The start URL is not valid.") }
        let key = Self.startKey(token)
        let now = configuration.clock.now()
        guard case .pending(let payload)? = try await storage.result(idHash: key, now: now),
            try await storage.takeResult(idHash: key, now: now, redemption: ResultRedemption(refreshToken: nil, sealedAnswer: nil, retryUntil: now))
        else {
            throw GatehouseError.invalidState("The start URL is unknown, already used or expired; ask the app for a new one.")
        }
        let pending = try JSONCoding.decoder().decode(PendingStart.self, from: payload)
        guard pending.providerId == providerId else { throw GatehouseError.invalidState("The start URL belongs to another provider.") }
        // A session ended since (a stolen token's, signed out everywhere) starts nothing more.
        if let familyId = pending.familyId, try await storage.session(familyId: familyId, now: now) == nil {
            throw GatehouseError.invalidState("The session that made this start URL has ended; sign in to the app again.")
        }
        return (pending.query.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }, FlowOwner(uid: pending.uid, sessionFamilyId: pending.familyId))
    }
}
