import Foundation
import JWTKit
import Logging

/// The gateway as a token issuer (design §2): ES256 ID tokens for one hour, opaque refresh
/// tokens stored hashed and rotated at every use, a reused refresh token revoking its whole
/// family. A session and its refresh-token family are one record, so signing out, disabling
/// the user or revoking sessions ends both, and ID tokens of an ended session stop being
/// accepted before they expire.
///
/// A rotation whose answer was lost (the connection or the database went away after the
/// commit) is safe to retry: for `refreshRetryWindow` seconds the token just spent returns
/// the same successor, kept sealed beside it, with a fresh ID token.
///
/// A class: every signed-in request's session check reaches it, and it holds the whole
/// configuration and the account service, shared by one reference.
public final class GatewayTokenService: Sendable {
    let configuration: GatewayConfiguration
    let storage: any GatehouseStorage
    let accounts: AccountService
    /// Seals the successor kept for retries.
    let vault: TokenVault
    let logger: Logger
    /// The signing keys (shared with the JWKS route).
    public let keys: SigningKeyRing
    /// Sessions whose ID tokens are refused without a read (`EndedSessions`).
    let ended = EndedSessions()

    /// Issues and checks tokens under `configuration`, signed with `keys`.
    init(
        configuration: GatewayConfiguration, storage: any GatehouseStorage, accounts: AccountService, vault: TokenVault, logger: Logger,
        keys: SigningKeyRing
    ) {
        self.configuration = configuration
        self.storage = storage
        self.accounts = accounts
        self.vault = vault
        self.logger = logger
        self.keys = keys
    }

    /// Refresh tokens start with this, so leaked ones are easy to recognise.
    public static let refreshTokenPrefix = "ghrt_"
    /// Accepted clock difference for `iat`/`exp`.
    static let skew: TimeInterval = 60
    /// The longest `name` a token carries, in characters (shown as `displayable` text: no
    /// controls or bidirectional overrides): a provider's profile may hold a name of any size,
    /// and every token of the session, each refresh's too, would carry it whole.
    static let longestName = 256
    /// The longest `email` a token carries, in bytes (RFC 5321's path limit, 254, with room):
    /// a longer one is no address, and is left out.
    static let longestEmail = 320

    /// Tokens for one session.
    public struct Issued: Sendable, Codable, Equatable {
        /// The ES256 ID token.
        public var idToken: String
        /// The opaque refresh token (shown once; stored hashed).
        public var refreshToken: String
        /// Seconds the ID token lives.
        public var expiresIn: Int
    }

    /// Who a verified ID token speaks for.
    public struct Bearer: Sendable {
        /// The token's claims.
        public var claims: GatewayIDTokenClaims
        /// Its live session.
        public var session: SessionRecord
    }

    /// A session's tokens, everything read and signed, and the refresh token the caller must
    /// store (in its own transaction: the session's, or a result's redemption) before
    /// answering them.
    public func prepareIssue(for session: SessionRecord) async throws -> (Issued, NewRefreshToken) {
        let refreshToken = Self.newRefreshToken()
        let (token, expiresIn) = try await idToken(for: session)
        let issued = Issued(idToken: token, refreshToken: refreshToken, expiresIn: expiresIn)
        return (
            issued, NewRefreshToken(tokenHash: SecureRandom.digest(refreshToken), familyId: session.familyId, issuedAt: configuration.clock.now())
        )
    }

    /// `POST /v1/token`: spends the refresh token, answers a new ID token and its successor.
    /// A token used twice revokes the family: both the thief and the user must sign in again —
    /// except a retry of the last rotation inside the retry window, which gets the same
    /// successor (a retry is not a reuse).
    public func refresh(_ refreshToken: String, client: SignInClient? = nil) async throws -> Issued {
        guard refreshToken.hasPrefix(Self.refreshTokenPrefix), refreshToken.utf8.count <= 128 else { throw GatehouseError.invalidRefreshToken() }
        let tokenHash = SecureRandom.digest(refreshToken)
        let now = configuration.clock.now()
        let successor = Self.newRefreshToken()
        let window = configuration.refreshRetryWindow
        let sealedSuccessor = window > 0 ? try await vault.seal(Data(successor.utf8), context: Self.successorContext(tokenHash)) : nil
        // Everything the answer needs is read and signed before the rotation commits: a store
        // error before it leaves the token as it was (the client's retry works), and after it
        // there is nothing left to fail. A token spent before still goes to the rotation, which
        // returns the kept successor or revokes its family.
        let prepared = try await storage.session(refreshTokenHash: tokenHash, now: now)
        var minted: (token: String, expiresIn: Int)?
        if let prepared { minted = try await self.idToken(for: prepared) }
        let rotation = try await storage.rotateRefreshToken(
            tokenHash: tokenHash,
            successor: RefreshSuccessor(
                tokenHash: SecureRandom.digest(successor), sealedToken: sealedSuccessor, retryUntil: now.addingTimeInterval(window),
                use: client.map { SessionUse(at: now, clientAddress: $0.address, userAgent: $0.userAgent) },
                // The sign-in's token and one per refresh (`validate()` bounds the limit).
                familyLimit: min(configuration.sessionRefreshLimit, GatewayConfiguration.maximumSessionRefreshLimit) + 1),
            now: now)
        switch rotation {
        case .rotated(let session):
            // The rotation found the session read above (a family never changes its session).
            guard let minted, session.familyId == prepared?.familyId else { throw GatehouseError.invalidRefreshToken() }
            return Issued(idToken: minted.token, refreshToken: successor, expiresIn: minted.expiresIn)
        case .retried(let session, let kept):
            guard let minted, session.familyId == prepared?.familyId else { throw GatehouseError.invalidRefreshToken() }
            let same = try await vault.open(kept, context: Self.successorContext(tokenHash))
            logger.info("refresh token retried within the retry window", metadata: ["user.id": "\(session.uid)"])
            return Issued(idToken: minted.token, refreshToken: String(decoding: same, as: UTF8.self), expiresIn: minted.expiresIn)
        case .reused:
            logger.warning(
                "refresh token reused: its session was revoked",
                metadata: ["user.id": "\(prepared?.uid ?? "unknown")"])
            throw GatehouseError.invalidRefreshToken()
        case .exhausted(let session):
            logger.notice(
                "session ended: it made its \(configuration.sessionRefreshLimit) refreshes (GATEHOUSE_SESSION_REFRESH_LIMIT)",
                metadata: ["user.id": "\(session.uid)"])
            throw GatehouseError.invalidRefreshToken()
        case .unknown:
            throw GatehouseError.invalidRefreshToken()
        }
    }

    /// The vault context of the successor kept beside the token with this hash: a sealed
    /// successor moved to another row does not open.
    static func successorContext(_ tokenHash: String) -> String {
        "refresh-successor|\(tokenHash)"
    }

    /// Verifies a gateway ID token: ES256 only, a published key, exact `iss` and `aud`,
    /// `exp`/`iat` with a minute of skew, a live session and an enabled account.
    public func verify(_ token: String) async throws -> Bearer {
        let now = configuration.clock.now()
        let claims: GatewayIDTokenClaims
        if let remembered = try await keys.rememberedClaims(of: token) {
            claims = remembered
        } else {
            claims = try await verifiedClaims(token)
        }
        guard claims.iss == configuration.publicURL, claims.aud == configuration.idTokenAudience else {
            throw GatehouseError.invalidIdToken("The ID token was issued by another issuer or for another audience.")
        }
        guard Double(claims.exp) > now.timeIntervalSince1970 - Self.skew else { throw GatehouseError.idTokenExpired() }
        guard Double(claims.iat) <= now.timeIntervalSince1970 + Self.skew else {
            throw GatehouseError.invalidIdToken("The ID token was issued in the future.")
        }
        guard !ended.contains(claims.sid, now: now) else { throw Self.sessionEnded() }
        guard let session = try await storage.session(familyId: claims.sid, now: now), session.uid == claims.sub else {
            ended.insert(claims.sid, until: Date(timeIntervalSince1970: Double(claims.exp) + Self.skew), now: now)
            throw Self.sessionEnded()
        }
        return Bearer(claims: claims, session: session)
    }

    /// The refusal of a token whose session has ended (built only when thrown).
    private static func sessionEnded() -> GatehouseError {
        GatehouseError.invalidIdToken("The ID token's session has ended (signed out or revoked).")
    }

    /// The claims of a token not seen before: header policy, then signature.
    private func verifiedClaims(_ token: String) async throws -> GatewayIDTokenClaims {
        // The algorithm is fixed: `none`, HS256 with a public key as secret, anything else is refused.
        guard let kid = try JWSHeaderPolicy.check(token, maxLength: 8 << 10, algorithms: ["ES256"]).kid else {
            throw GatehouseError.invalidIdToken("The ID token has no key id.")
        }
        do {
            return try await keys.verify(token, kid: kid)
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw GatehouseError.invalidIdToken("The ID token's signature or claims do not verify.")
        }
    }

    /// The ID token of a session, with the account's current profile, and the seconds it lives:
    /// `idTokenLifetime`, or less when the session ends sooner. The gateway refuses a token of an
    /// ended session at once, but a service verifying it offline (JWKS) trusts it until `exp`.
    private func idToken(for session: SessionRecord) async throws -> (token: String, expiresIn: Int) {
        guard let account = try await storage.account(uid: session.uid) else { throw GatehouseError.invalidRefreshToken() }
        if account.disabled { throw GatehouseError.userDisabled() }
        let links = try await storage.links(uid: account.uid)
        let profile = try await accounts.unifiedProfile(for: account, links: links)
        var identities: [String: [String]] = [:]
        for link in links { identities[link.providerId, default: []].append(link.federatedId) }
        let now = configuration.clock.now()
        let expires = min(now.addingTimeInterval(configuration.idTokenLifetime), session.expiresAt)
        let email = profile.email.flatMap { $0.utf8.count <= Self.longestEmail ? $0 : nil }
        let name = profile.displayName.map { $0.displayable(characters: Self.longestName, bytes: 4 * Self.longestName) }
        var claims = GatewayIDTokenClaims(
            iss: configuration.publicURL, aud: configuration.idTokenAudience, sub: account.uid, iat: Int(now.timeIntervalSince1970),
            exp: Int(expires.timeIntervalSince1970),
            authTime: Int(session.authenticatedAt.timeIntervalSince1970), signInProvider: session.signInProvider, identities: identities,
            email: email, emailVerified: email != nil && profile.emailVerified, name: name.flatMap { $0.isEmpty ? nil : $0 },
            sid: session.familyId)
        // The sign-in's own claims, and the account's as they are now over them (a refresh picks
        // a change up): a service that changes a claim, a demotion say, reaches every session,
        // even one whose hook answered the same name for itself. A session's own claims may be
        // a restriction, so they are never dropped to make room: when both together pass the
        // size limit (a hook gave the account larger claims at another sign-in; a service's
        // change that would is refused), the session mints no more and its user signs in again.
        if account.customClaims != nil || session.claims != nil {
            // The operator claim comes from the account alone, never from a session's own
            // claims (which hooks cannot set it in, and which could outlive a demotion).
            var sessionClaims = CustomClaims(stored: session.claims)
            if let operatorClaim = configuration.protectedOperatorClaim { sessionClaims = sessionClaims.removing(operatorClaim) }
            guard let merged = sessionClaims.merging(CustomClaims(stored: account.customClaims)) else {
                logger.notice("session claims no longer fit beside the account's: the session mints no more", metadata: ["user.id": "\(account.uid)"])
                throw GatehouseError(
                    code: .invalidRefreshToken,
                    detail:
                        "This session's own claims no longer fit beside the account's (\(CustomClaims.maximumBytes) bytes together at most); sign in again."
                )
            }
            claims.custom = merged.members
        }
        return (try await keys.sign(claims), max(0, claims.exp - claims.iat))
    }

    static func newRefreshToken() -> String {
        refreshTokenPrefix + SecureRandom.token(byteCount: 32)
    }
}
