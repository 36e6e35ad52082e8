import Foundation

/// Credentials of internal services (design §2): created by `gatehouse keys`, sent as
/// `Authorization: Bearer <secret>`, stored only as a SHA-256 hash (the secrets are 256-bit
/// random values, so a plain hash is enough and lookups stay one indexed query).
public struct ServiceKeyService: Sendable {
    /// The fixed scopes a key can hold; `api:<provider>` (passthrough calls) and
    /// `tokens:<provider>` (the token vault) name a provider id as well.
    public static let knownScopes: Set<String> = [
        "profile:read", "photo:read", "admin", "admin:users", "admin:keys", "admin:webhooks", "users:claims",
    ]
    /// The prefixes of the per-provider scopes.
    public static let providerScopePrefixes = ["api:", "tokens:"]

    /// Whether `scope` is a scope a key can hold: a fixed one, or a per-provider one naming a
    /// provider id (`github.com`, `oidc.corp`).
    public static func isKnown(_ scope: String) -> Bool {
        if knownScopes.contains(scope) { return true }
        guard let prefix = providerScopePrefixes.first(where: scope.hasPrefix) else { return false }
        let provider = scope.dropFirst(prefix.count)
        return !provider.isEmpty && provider.count <= 64
            && provider.utf8.allSatisfy {
                $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || (0x30...0x39).contains($0) || (0x61...0x7A).contains($0)
            }
    }
    /// Every secret starts with this, so leaked keys are easy to recognise and scan for.
    public static let secretPrefix = "ghsk_"

    let storage: any GatehouseStorage
    /// Where key creation and revocation are recorded (by the command line, which manages keys).
    let audit: AuditLog
    /// Keys read lately (bounded in number and age, dropped on revocation).
    let cache: ServiceKeyCache
    /// The webhook events each write records in its own transaction.
    public var events = EventRecorder.disabled
    /// Where each key's last use is recorded, if anywhere.
    public var uses: ServiceKeyUses?

    /// Creates the service over the store; `cacheLifetime` 0 reads the store on every request.
    public init(
        storage: any GatehouseStorage, audit: AuditLog = .disabled, cacheLifetime: TimeInterval = 0, clock: any GatehouseClock = SystemClock()
    ) {
        self.init(storage: storage, audit: audit, cache: ServiceKeyCache(lifetime: cacheLifetime, clock: clock))
    }

    /// Creates the service over the store with a cache that a change feed keeps current
    /// (`CachedStore.serviceKeys`).
    public init(storage: any GatehouseStorage, audit: AuditLog = .disabled, cache: ServiceKeyCache) {
        self.storage = storage
        self.audit = audit
        self.cache = cache
    }

    /// Creates a key and returns it with its secret, which is shown once and never stored.
    /// `actor` is the audit's (the command line by default; an operator's key over HTTP).
    public func create(name: String, scopes: [String], by actor: AuditActor = .commandLine) async throws -> (key: ServiceKeyRecord, secret: String) {
        let name = name.trimmingCharacters(in: .whitespaces)
        // Plain text only: `keys list` prints names to an operator's terminal, where a control
        // sequence could hide a key's line or forge others.
        guard !name.isEmpty, name.count <= 100, name.utf8.count <= 400, name.unicodeScalars.allSatisfy(\.showsAsItself) else {
            throw GatehouseError.invalidArgument(
                "A key needs a name of 1 to 100 characters (at most 400 bytes) of plain text: no control, format or bidirectional characters.")
        }
        let unknown = scopes.filter { !Self.isKnown($0) }
        guard unknown.isEmpty, !scopes.isEmpty else {
            throw GatehouseError.invalidArgument(
                "Scopes must be among \(Self.knownScopes.sorted().joined(separator: ", ")), api:<provider id> and tokens:<provider id>.")
        }
        let secret = Self.secretPrefix + SecureRandom.token(byteCount: 32)
        let key = ServiceKeyRecord(
            id: "sk_" + String(SecureRandom.token(byteCount: 9)), name: name, secretHash: SecureRandom.digest(secret),
            scopes: Array(Set(scopes)).sorted(), createdAt: Date())
        let created = WebhookEvent(
            .serviceKeyCreated, at: key.createdAt,
            data: ["keyId": .string(key.id), "name": .string(key.name), "scopes": .array(key.scopes.map(JSONValue.string))])
        try await events.recording([created]) { try await storage.insertServiceKey(key) }
        audit.record(.serviceKeyCreated, by: actor, keyId: key.id)
        return (key, secret)
    }

    /// Every key, revoked ones included.
    public func list() async throws -> [ServiceKeyRecord] {
        try await storage.serviceKeys()
    }

    /// Revokes a key; `false` when it does not exist or was already revoked.
    /// `actor` is the audit's (the command line by default; an operator's key over HTTP).
    public func revoke(id: String, by actor: AuditActor = .commandLine) async throws -> Bool {
        let event = WebhookEvent(.serviceKeyRevoked, at: Date(), data: ["keyId": .string(id)])
        let revoked = try await events.recording([event]) { try await storage.revokeServiceKey(id: id, at: Date()) }
        cache.forget(keyId: id)
        if revoked { audit.record(.serviceKeyRevoked, by: actor, keyId: id) }
        return revoked
    }

    /// Whether a key holding `held` may hand out (or take back) a key holding `scopes`: only
    /// scopes it holds itself (`admin` standing for every `admin:…` scope too) — a key cannot
    /// mint a key stronger than it is.
    public static func covers(_ held: [String], _ scopes: [String]) -> Bool {
        scopes.allSatisfy { scope in held.contains(scope) || (scope.hasPrefix("admin:") && held.contains("admin")) }
    }

    /// The key with this secret, which must hold `scope`: a missing, unknown or revoked key
    /// is `unauthenticated`, a missing scope `permission-denied`.
    public func authorize(secret: String?, scope: String) async throws -> ServiceKeyRecord {
        guard let secret, secret.utf8.count <= 512, secret.hasPrefix(Self.secretPrefix),
            let key = try await key(secretHash: SecureRandom.digest(secret)),
            key.revokedAt == nil
        else {
            throw GatehouseError.unauthenticated()
        }
        // `admin` covers every narrower `admin:…` scope.
        guard key.scopes.contains(scope) || (scope.hasPrefix("admin:") && key.scopes.contains("admin")) else {
            throw GatehouseError(
                code: .permissionDenied, detail: "This service key does not have the \(scope) scope.")
        }
        uses?.note(key.id)
        return key
    }

    /// Each key's last recorded use (keys never used are missing).
    public func lastUses() async throws -> [String: Date] {
        try await storage.serviceKeyUses()
    }

    /// The key with this hash: from the cache, else read from the store.
    private func key(secretHash: String) async throws -> ServiceKeyRecord? {
        try await cache.key(secretHash: secretHash) { try await storage.serviceKey(secretHash: secretHash) }
    }
}
