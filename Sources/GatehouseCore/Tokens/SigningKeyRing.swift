import Crypto
import Foundation
import JWTKit
import Logging

/// The gateway's ES256 signing keys, kept in storage (private halves sealed by the token
/// vault) so that every instance signs with the same newest key and verifies every key still
/// published. `gatehouse keys rotate-signing` adds a key; instances load it within
/// `reloadInterval` (or at once when they meet a token with its `kid`) and publish it, and
/// start signing with it only three reload intervals after it was stored: by then every
/// instance knows it, so no instance ever meets a token whose key it has not loaded yet, and
/// a copy of the JWKS that lacks it has expired from every HTTP cache (the JWKS may be cached
/// for one reload interval, `jwksMaxAge`, and every instance publishes the key within one).
public actor SigningKeyRing {
    /// A usable key.
    struct Key {
        let kid: String
        let createdAt: Date
        let privateKey: P256.Signing.PrivateKey
    }

    private let storage: any GatehouseStorage
    private let vault: TokenVault
    private let tokenLifetime: TimeInterval
    private let logger: Logger
    /// How often the ring rereads storage to notice keys added by other instances.
    private let reloadInterval: TimeInterval
    /// Unknown `kid`s may trigger a reread at most this often (forged kids cost nothing).
    private let unknownKidReloadInterval: TimeInterval = 5
    private let clock: any GatehouseClock

    private var keys: [Key] = []
    /// A token whose header and signature verified: its claims and the key that signed it.
    private struct Verified: Sendable {
        var claims: GatewayIDTokenClaims
        var kid: String
    }

    /// Tokens whose header and signature verified, by token (bounded; a token lives an hour).
    private let verified = RecentValues<String, Verified>(capacity: 4096)
    private var collection = JWTKeyCollection()
    private var loadedAt: Date = .distantPast
    private var unknownKidReloadAt: Date = .distantPast

    /// A ring over the store; `tokenLifetime` is how long an old key stays published after
    /// a newer one took over (the lifetime of the tokens it may have signed).
    public init(
        storage: any GatehouseStorage, vault: TokenVault, tokenLifetime: TimeInterval, reloadInterval: TimeInterval = 30,
        clock: any GatehouseClock = SystemClock(), logger: Logger
    ) {
        self.reloadInterval = reloadInterval
        self.clock = clock
        self.storage = storage
        self.vault = vault
        self.tokenLifetime = tokenLifetime
        self.logger = logger
    }

    /// Creates and stores a new newest key; returns its kid. Used at first start (no key
    /// yet) and by `gatehouse keys rotate-signing`.
    @discardableResult
    public static func addKey(storage: any GatehouseStorage, vault: TokenVault, at date: Date = Date()) async throws -> String {
        let key = P256.Signing.PrivateKey()
        let kid = "gh-" + String(SecureRandom.digest(key.publicKey.rawRepresentation.base64EncodedString()).prefix(16))
        let sealed = try await vault.seal(key.rawRepresentation, context: vaultContext(kid))
        try await storage.insertSigningKey(SigningKeyRecord(kid: kid, sealedPrivateKey: sealed, createdAt: date))
        return kid
    }

    /// Signs `claims` with the newest active key.
    func sign(_ claims: GatewayIDTokenClaims) async throws -> String {
        try await loadIfStale()
        let now = clock.now()
        // A fresh deployment's first keys are not active yet: the oldest one signs meanwhile.
        guard let signer = keys.first(where: { activeFrom($0) <= now }) ?? keys.last else { throw GatehouseError.internalError() }
        var header = JWTHeader()
        header.typ = "JWT"
        return try await collection.sign(claims, kid: JWKIdentifier(string: signer.kid), header: header)
    }

    /// When a key starts signing: three reload intervals after it was stored. Every instance
    /// publishes it within the first; a JWKS fetched just before lives one more
    /// (`jwksMaxAge`); the third covers clock differences between instances.
    private func activeFrom(_ key: Key) -> Date {
        key.createdAt.addingTimeInterval(3 * reloadInterval)
    }

    /// How long the published JWKS may be cached, in whole seconds (at least one): one reload
    /// interval, so that no cached copy lacks a key that signs (`activeFrom`).
    public nonisolated var jwksMaxAge: Int { max(1, Int(reloadInterval)) }

    /// Verifies the signature of a token signed by a published key (rereading storage once
    /// when the kid is unknown: another instance may have rotated).
    func verify(_ token: String, kid: String) async throws -> GatewayIDTokenClaims {
        try await loadIfStale()
        if !published().contains(where: { $0.kid == kid }), clock.now() >= unknownKidReloadAt {
            unknownKidReloadAt = clock.now().addingTimeInterval(unknownKidReloadInterval)
            try await load()
        }
        guard published().contains(where: { $0.kid == kid }) else {
            throw GatehouseError.invalidIdToken("The ID token was signed by a key the gateway does not publish.")
        }
        // The same token string verifies the same way while its key is published (checked
        // just above, on every call): remember the claims instead of checking the ES256
        // signature again. The caller still checks expiry, issuer, audience and the session.
        if let remembered = verified.value(for: token), remembered.kid == kid { return remembered.claims }
        let claims = try await collection.verify(token, as: GatewayIDTokenClaims.self)
        verified.insert(Verified(claims: claims, kid: kid), for: token)
        return claims
    }

    /// The claims of a token that verified before (its header policy and signature were
    /// checked then, and the same bytes check the same way), while its key is still published;
    /// `nil` otherwise (then `verify` checks it whole). Spares a bearer's every request the
    /// header's base64 and JSON.
    func rememberedClaims(of token: String) async throws -> GatewayIDTokenClaims? {
        guard let remembered = verified.value(for: token) else { return nil }
        try await loadIfStale()
        guard published().contains(where: { $0.kid == remembered.kid }) else { return nil }
        return remembered.claims
    }

    /// The public keys as a JWK Set (`/.well-known/jwks.json`).
    public func jwks() async throws -> [[String: String]] {
        try await loadIfStale()
        return published().map { key in
            let point = key.privateKey.publicKey.rawRepresentation  // x ‖ y, 32 bytes each
            return [
                "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": key.kid,
                "x": Base64URL.encode(Array(point.prefix(32))), "y": Base64URL.encode(Array(point.suffix(32))),
            ]
        }
    }

    /// Whether a signing key is loaded (readiness).
    public func isReady() async -> Bool {
        (try? await loadIfStale()) != nil && !keys.isEmpty
    }

    /// The newest key (published before it signs), and older ones whose successor took over
    /// less than a token lifetime (plus a minute of clock skew) ago: a token they signed may
    /// still be alive.
    private func published() -> [Key] {
        var result: [Key] = []
        for (index, key) in keys.enumerated() {
            if index == 0 || activeFrom(keys[index - 1]).addingTimeInterval(tokenLifetime + 60) > clock.now() {
                result.append(key)
            } else {
                break
            }
        }
        return result
    }

    private func loadIfStale() async throws {
        if keys.isEmpty || clock.now().timeIntervalSince(loadedAt) > reloadInterval { try await load() }
    }

    private func load() async throws {
        var records = try await storage.signingKeys()
        if records.isEmpty {
            // First start: make one. Under the store's lock, so replicas starting together
            // share one key instead of each signing with its own until they reload.
            let storage = self.storage
            let vault = self.vault
            let now = clock.now()
            records = try await storage.withLock("signing-key-bootstrap") {
                if try await storage.signingKeys().isEmpty { try await Self.addKey(storage: storage, vault: vault, at: now) }
                return try await storage.signingKeys()
            }
        }
        var loaded: [Key] = []
        for record in records {
            let raw: Data
            do {
                raw = try await vault.open(record.sealedPrivateKey, context: Self.vaultContext(record.kid))
            } catch TokenVault.VaultError.unreadable {
                // A key sealed under an encryption key that is no longer configured: skip it
                // (tokens it signed stop verifying) rather than refuse to start. Storage
                // errors are not caught: an outage must not look like a lost key.
                logger.warning("signing key unreadable; skipped", metadata: ["key.id": "\(record.kid)"])
                continue
            }
            loaded.append(Key(kid: record.kid, createdAt: record.createdAt, privateKey: try P256.Signing.PrivateKey(rawRepresentation: raw)))
        }
        if loaded.isEmpty {
            try await Self.addKey(storage: storage, vault: vault, at: clock.now())
            return try await load()
        }
        let fresh = JWTKeyCollection()
        for key in loaded {
            await fresh.add(ecdsa: try ES256PrivateKey(pem: key.privateKey.pemRepresentation), kid: JWKIdentifier(string: key.kid))
        }
        keys = loaded
        collection = fresh
        loadedAt = clock.now()
    }

    static func vaultContext(_ kid: String) -> String { "signing-key|\(kid)" }
}
