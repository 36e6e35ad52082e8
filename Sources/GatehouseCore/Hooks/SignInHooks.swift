/// What the core asks the app at sign-in (design: the core decides *when*; the machinery
/// that signs and sends the call is `HookClient`).
public protocol SignInHooks: Sendable {
    /// Whether a hook is configured for `event` (an unconfigured one is not asked).
    func asks(_ event: HookEvent) -> Bool
    /// Asks the hook of `event`. Returns what an allowing answer adds; throws `sign-in-denied`
    /// for a denial and, when the hook cannot be asked and the policy is `deny`,
    /// `hook-unavailable`. Called outside every transaction, holding no connection or lock.
    func ask(_ event: HookEvent, _ data: HookRequest.Payload) async throws -> HookAllowance
    /// What the failure policy makes of answers of `event` that were usable one by one but
    /// not together (`reason` says why): `hook-unavailable` under `deny`, nothing added under
    /// `allow`; logged and counted as an unusable answer.
    func unusable(_ event: HookEvent, reason: String) throws -> HookAllowance
}

/// What an allowing hook adds to the sign-in.
public struct HookAllowance: Sendable, Equatable {
    /// Replaces the account's custom claims when present (stored with the sign-in's write).
    public var customClaims: CustomClaims?
    /// Claims for the tokens of this sign-in only (and their refreshes).
    public var sessionClaims: CustomClaims?

    /// Allowed, nothing added.
    public static let nothing = HookAllowance(customClaims: nil, sessionClaims: nil)

    /// An allowance adding these claims.
    public init(customClaims: CustomClaims?, sessionClaims: CustomClaims?) {
        self.customClaims = customClaims
        self.sessionClaims = sessionClaims
    }

    /// The bytes the claims of a token minted with this allowance would take (its session
    /// claims with its custom claims over them, as `GatewayTokenService` mints them).
    var tokenClaimsSize: Int {
        Self.tokenClaimsSize(session: sessionClaims?.members ?? [:], account: customClaims?.members ?? [:])
    }

    /// The bytes of `session` with `account` over it, serialized.
    static func tokenClaimsSize(session: [String: JSONValue], account: [String: JSONValue]) -> Int {
        let union = session.merging(account) { _, accountValue in accountValue }
        return (try? JSONCoding.encoder().encode(union).count) ?? Int.max
    }

    /// Both allowances, `later` winning: its custom claims replace, its session claims are
    /// merged over the earlier ones.
    func then(_ later: HookAllowance) -> HookAllowance {
        let session: CustomClaims? =
            switch (sessionClaims, later.sessionClaims) {
            case (nil, let claims), (let claims, nil): claims
            // Whole, whatever the size: `AccountService.askNew` checks what the two add up to.
            case (let first?, let second?): first.overlaid(by: second)
            }
        return HookAllowance(customClaims: later.customClaims ?? customClaims, sessionClaims: session)
    }
}

/// No hooks configured: every sign-in is allowed as it is.
public struct NoSignInHooks: SignInHooks {
    /// No hooks.
    public init() {}
    /// Never.
    public func asks(_ event: HookEvent) -> Bool { false }
    /// Allowed, nothing added.
    public func ask(_ event: HookEvent, _ data: HookRequest.Payload) async throws -> HookAllowance { .nothing }
    /// Nothing added (never asked: no hook answered).
    public func unusable(_ event: HookEvent, reason: String) throws -> HookAllowance { .nothing }
}
