import Foundation

/// A started sign-in, waiting for its callback. Keyed by the SHA-256 of `state`.
public struct SignInTransaction: Sendable, Equatable {
    /// SHA-256 hex of the `state` sent to the provider.
    public var stateHash: String
    /// SHA-256 hex of the transaction cookie that binds the flow to one browser.
    public var bindingHash: String
    /// The provider the flow was started for (checked against the callback's path).
    public var providerId: String
    /// The PKCE verifier, revealed only to the token endpoint.
    public var codeVerifier: String
    /// The nonce (OIDC providers).
    public var nonce: String
    /// Where the browser returns.
    public var returnTo: String
    /// `signin`, `link` or `reauthenticate`.
    public var mode: SignInMode
    /// The signed-in account a `link` or `reauthenticate` flow belongs to; `nil` for `signin`.
    public var uid: String?
    /// The session that started a `link` or `reauthenticate` flow (its refresh-token family):
    /// the flow completes only while it lives. `nil` for `signin`, and for a flow stored by an
    /// earlier version.
    public var sessionFamilyId: String?
    /// The callback URL sent on the authorize request; the token request repeats it.
    public var redirectURI: String
    /// What the provider needs back at the callback (Microsoft: the tenant of the endpoints used); may be empty.
    public var providerContext: String
    /// When the flow started.
    public var createdAt: Date
    /// When the flow stops being acceptable.
    public var expiresAt: Date
    /// The client's `result_challenge` (base64url SHA-256 of its verifier): only the holder of
    /// the verifier can redeem the flow's result. `nil` for an unbound flow.
    public var resultChallenge: String?

    /// Creates a transaction.
    public init(
        stateHash: String, bindingHash: String, providerId: String, codeVerifier: String, nonce: String, returnTo: String, mode: SignInMode,
        redirectURI: String, providerContext: String = "", uid: String? = nil, sessionFamilyId: String? = nil, createdAt: Date,
        expiresAt: Date, resultChallenge: String? = nil
    ) {
        self.uid = uid
        self.sessionFamilyId = sessionFamilyId
        self.resultChallenge = resultChallenge
        self.stateHash = stateHash
        self.bindingHash = bindingHash
        self.providerId = providerId
        self.codeVerifier = codeVerifier
        self.nonce = nonce
        self.returnTo = returnTo
        self.mode = mode
        self.redirectURI = redirectURI
        self.providerContext = providerContext
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// A Gatehouse account.
public struct AccountRecord: Sendable, Equatable {
    /// The user id.
    public var uid: String
    /// When the account was created.
    public var createdAt: Date
    /// The last successful sign-in.
    public var lastSignInAt: Date
    /// Disabled accounts cannot sign in or be read by the user.
    public var disabled: Bool
    /// The custom claims (a serialized JSON object, checked by `CustomClaims`), `nil` for none.
    public var customClaims: Data?

    /// Creates an account record.
    public init(uid: String, createdAt: Date, lastSignInAt: Date, disabled: Bool = false, customClaims: Data? = nil) {
        self.customClaims = customClaims
        self.uid = uid
        self.createdAt = createdAt
        self.lastSignInAt = lastSignInAt
        self.disabled = disabled
    }
}

/// One provider identity linked to an account, with its profile snapshot and its tokens,
/// sealed by the token vault.
public struct ProviderLinkRecord: Sendable, Equatable {
    /// The account.
    public var uid: String
    /// The provider id.
    public var providerId: String
    /// The provider's user id; (providerId, federatedId) is unique across all accounts.
    public var federatedId: String
    /// The normalized profile of the last sign-in or profile call, as JSON.
    public var profileJSON: Data
    /// The provider tokens, sealed by `TokenVault` (never plaintext).
    public var sealedTokens: String
    /// When the identity was linked.
    public var linkedAt: Date
    /// When tokens or profile last changed.
    public var updatedAt: Date
    /// The profile's email, normalized (`EmailAddress`), when the provider vouches for it;
    /// the only email that can match an account under "one account per email".
    public var verifiedEmail: String?

    /// Creates a link record.
    public init(
        uid: String, providerId: String, federatedId: String, profileJSON: Data, sealedTokens: String, linkedAt: Date, updatedAt: Date,
        verifiedEmail: String? = nil
    ) {
        self.verifiedEmail = verifiedEmail
        self.uid = uid
        self.providerId = providerId
        self.federatedId = federatedId
        self.profileJSON = profileJSON
        self.sealedTokens = sealedTokens
        self.linkedAt = linkedAt
        self.updatedAt = updatedAt
    }
}

/// One sign-in: the browser's session cookie and the refresh-token family issued with it
/// live and die together. Keyed by the SHA-256 of the cookie value; the family id is the
/// `sid` claim of the gateway ID tokens it issues.
public struct SessionRecord: Sendable, Equatable {
    /// SHA-256 hex of the session cookie.
    public var idHash: String
    /// The signed-in account.
    public var uid: String
    /// When the session started: the sign-in.
    public var createdAt: Date
    /// When the user last proved who they are to the provider they signed in with: its ID
    /// token's `auth_time` where it said (a sign-in its own session in the browser answered may
    /// be hours older than the session), else the sign-in. The gateway's ID tokens carry it as
    /// `auth_time`, and the recent-login window counts from it.
    public var authenticatedAt: Date
    /// When the session (and every refresh token of its family) ends.
    public var expiresAt: Date
    /// The refresh-token family's id (random; public in ID tokens as `sid`).
    public var familyId: String
    /// The provider the user signed in with (`sign_in_provider`).
    public var signInProvider: String
    /// The claims a hook added to this sign-in's tokens only (`sessionClaims`, a serialized
    /// JSON object), `nil` for none.
    public var claims: Data?
    /// The sign-in's client, written with the session as its first use (see `SessionUse`);
    /// not read back with the session.
    public var firstUse: SessionUse?

    /// Creates a session record; `familyId` defaults to a random one, `authenticatedAt` to
    /// `createdAt`.
    public init(
        idHash: String, uid: String, createdAt: Date, expiresAt: Date, familyId: String = SecureRandom.token(byteCount: 16),
        signInProvider: String = "", claims: Data? = nil, authenticatedAt: Date? = nil
    ) {
        self.claims = claims
        self.idHash = idHash
        self.uid = uid
        self.createdAt = createdAt
        self.authenticatedAt = authenticatedAt ?? createdAt
        self.expiresAt = expiresAt
        self.familyId = familyId
        self.signInProvider = signInProvider
    }
}

extension SessionRecord {
    /// How many sessions `SessionStore.sessions(uid:now:)` lists at most (the newest).
    public static let listLimit = 100
}

/// A credential of an internal service. Only the SHA-256 of the secret is stored.
public struct ServiceKeyRecord: Sendable, Equatable {
    /// The public id (shown by `gatehouse keys list`, used to revoke).
    public var id: String
    /// A name for people.
    public var name: String
    /// SHA-256 hex of the secret.
    public var secretHash: String
    /// Granted scopes (`profile:read`, `photo:read`, `admin`).
    public var scopes: [String]
    /// When it was created.
    public var createdAt: Date
    /// When it was revoked; revoked keys authenticate nothing.
    public var revokedAt: Date?

    /// Creates a record.
    public init(id: String, name: String, secretHash: String, scopes: [String], createdAt: Date, revokedAt: Date? = nil) {
        self.id = id
        self.name = name
        self.secretHash = secretHash
        self.scopes = scopes
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

/// A position in the list of all links (`GatehouseStorage.links(after:limit:)`).
public struct LinkCursor: Sendable, Equatable {
    /// The provider id of the last link seen.
    public var providerId: String
    /// The federated id of the last link seen.
    public var federatedId: String

    /// The position right after this link.
    public init(providerId: String, federatedId: String) {
        self.providerId = providerId
        self.federatedId = federatedId
    }
}

/// A refresh token to store, by hash, in a session's family.
public struct NewRefreshToken: Sendable, Equatable {
    /// SHA-256 of the token.
    public var tokenHash: String
    /// The session's family.
    public var familyId: String
    /// When it was issued.
    public var issuedAt: Date

    /// Describes the token.
    public init(tokenHash: String, familyId: String, issuedAt: Date) {
        self.tokenHash = tokenHash
        self.familyId = familyId
        self.issuedAt = issuedAt
    }
}

/// Storage failures the core reacts to.
public enum StorageError: Error, Sendable, Equatable {
    /// A uniqueness rule was violated (for example the same identity linked twice).
    case conflict
    /// A write conditioned on what was read found it changed since (claims a hook answered
    /// for, replaced meanwhile): nothing was committed; read again and redo.
    case changedMeanwhile
    /// A write to a link found no such link: it was unlinked, or its account deleted, since
    /// it was read. Nothing was committed.
    case linkGone
    /// A sign-in's write (a returning identity's sign-in, a link added or renewed) found its
    /// account disabled since it was read (an operator disabled it while a hook was asked).
    /// Nothing was committed.
    case accountDisabled
    /// A write that consumes a pending credential found it gone: another claim took it (or
    /// the purge did, once expired). Nothing was committed.
    case pendingGone
    /// A refresh token's write found its session ended since it was read (signed out, signed
    /// out everywhere, its account disabled or deleted): the token would belong to nothing.
    /// Nothing was committed.
    case sessionGone
    /// The store cannot be reached right now (a database restart, a network failure).
    case unavailable
    /// The store refuses work for lack of a resource (a full disk, no memory, no connection
    /// slots, an I/O error): nothing was committed. `condition` names it for the log (never
    /// values); the API answers `storage-unavailable`.
    case exhausted(condition: String)
}

/// The last use of a session, as operators see it: its sign-in or the last refresh of its
/// tokens (a request that presents an ID token or the cookie is not recorded: those are reads).
public struct SessionUse: Sendable, Equatable {
    /// When.
    public var at: Date
    /// The client's address (the peer, or the trusted proxies' `X-Forwarded-For` hop).
    public var clientAddress: String
    /// The client's `User-Agent`, at most 512 bytes.
    public var userAgent: String?

    /// A use.
    public init(at: Date, clientAddress: String, userAgent: String?) {
        self.at = at
        self.clientAddress = clientAddress.truncated(toBytes: 64)
        self.userAgent = userAgent.map { $0.truncated(toBytes: 512) }
    }
}
