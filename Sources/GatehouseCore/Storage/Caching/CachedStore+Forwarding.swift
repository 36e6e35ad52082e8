import Foundation

// What the cache neither holds nor depends on goes straight to the configured store.

extension CachedStore {
    /// Migrates the store.
    public func migrate() async throws { try await base.migrate() }

    /// Pings the store.
    public func ping(within limit: Duration?) async throws { try await base.ping(within: limit) }

    /// Purges expired records (an expired session is never answered from memory either).
    public func purgeExpired(now: Date) async throws { try await base.purgeExpired(now: now) }

    /// Saves a started sign-in.
    public func insertTransaction(_ transaction: SignInTransaction) async throws { try await base.insertTransaction(transaction) }

    /// Takes a started sign-in.
    public func takeTransaction(stateHash: String, bindingHash: String) async throws -> SignInTransaction? {
        try await base.takeTransaction(stateHash: stateHash, bindingHash: bindingHash)
    }

    /// Saves a sign-in result.
    public func insertResult(idHash: String, payload: Data, expiresAt: Date) async throws {
        try await base.insertResult(idHash: idHash, payload: payload, expiresAt: expiresAt)
    }

    /// Reads a sign-in result.
    public func result(idHash: String, now: Date) async throws -> StoredResultState? { try await base.result(idHash: idHash, now: now) }

    /// Redeems a sign-in result.
    public func takeResult(idHash: String, now: Date, redemption: ResultRedemption) async throws -> Bool {
        guard let family = redemption.endsSession else { return try await base.takeResult(idHash: idHash, now: now, redemption: redemption) }
        return try await writing {
            try await base.takeResult(idHash: idHash, now: now, redemption: redemption)
        } then: {
            cache.invalidate(familyId: family)
        }
    }

    /// Spends a single-use credential.
    public func spendToken(hash: String, expiresAt: Date) async throws -> Bool { try await base.spendToken(hash: hash, expiresAt: expiresAt) }
    /// Forgets a spent credential.
    public func releaseToken(hash: String) async throws { try await base.releaseToken(hash: hash) }

    /// The link of an identity: always from the store (linking and refreshes decide on it).
    public func link(providerId: String, federatedId: String) async throws -> ProviderLinkRecord? {
        try await base.link(providerId: providerId, federatedId: federatedId)
    }

    /// Accounts by verified email.
    public func uids(verifiedEmail: String, limit: Int) async throws -> [String] { try await base.uids(verifiedEmail: verifiedEmail, limit: limit) }

    /// Accounts by profile email.
    public func uids(email: String, limit: Int) async throws -> [String] { try await base.uids(email: email, limit: limit) }

    /// Every link, in batches.
    public func links(after: LinkCursor?, limit: Int) async throws -> [ProviderLinkRecord] { try await base.links(after: after, limit: limit) }

    /// Parks a pending credential.
    public func insertPendingCredential(_ credential: PendingCredentialRecord) async throws { try await base.insertPendingCredential(credential) }

    /// Takes a pending credential.
    public func takePendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord? {
        try await base.takePendingCredential(tokenHash: tokenHash, now: now)
    }

    /// Reads a pending credential.
    public func pendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord? {
        try await base.pendingCredential(tokenHash: tokenHash, now: now)
    }

    /// Saves a session (nothing held can be out of date: absent sessions are never cached),
    /// then drops the one it ends, if any.
    public func insertSession(_ session: SessionRecord, firstRefreshToken: NewRefreshToken?, ending: String?) async throws {
        guard let ending else { return try await base.insertSession(session, firstRefreshToken: firstRefreshToken, ending: nil) }
        try await writing {
            try await base.insertSession(session, firstRefreshToken: firstRefreshToken, ending: ending)
        } then: {
            cache.invalidate(familyId: ending)
        }
    }

    /// A refresh token's session: always from the store (a rotation decides on it).
    public func session(refreshTokenHash: String, now: Date) async throws -> SessionRecord? {
        try await base.session(refreshTokenHash: refreshTokenHash, now: now)
    }

    /// Stores a refresh token.
    public func insertRefreshToken(tokenHash: String, familyId: String, at date: Date) async throws {
        try await base.insertRefreshToken(tokenHash: tokenHash, familyId: familyId, at: date)
    }

    /// Saves a signing key.
    public func insertSigningKey(_ key: SigningKeyRecord) async throws { try await base.insertSigningKey(key) }

    /// Every signing key.
    public func signingKeys() async throws -> [SigningKeyRecord] { try await base.signingKeys() }

    /// Re-seals a signing key.
    public func replaceSealedSigningKey(kid: String, expected: String, with sealed: String) async throws -> Bool {
        try await base.replaceSealedSigningKey(kid: kid, expected: expected, with: sealed)
    }

    /// Saves a data key.
    public func insertDataKey(_ key: DataKeyRecord) async throws { try await base.insertDataKey(key) }

    /// Every data key.
    public func dataKeys() async throws -> [DataKeyRecord] { try await base.dataKeys() }

    /// Re-wraps a data key.
    public func replaceWrappedDataKey(id: String, expected: String, with wrapped: String) async throws -> Bool {
        try await base.replaceWrappedDataKey(id: id, expected: expected, with: wrapped)
    }

    /// Deletes a data key.
    public func deleteDataKey(id: String) async throws -> Bool { try await base.deleteDataKey(id: id) }

    /// What each key seals.
    public func sealingKeyUsage(now: Date) async throws -> [String: Int] { try await base.sealingKeyUsage(now: now) }
    public func holdsSealedValues(now: Date) async throws -> Bool { try await base.holdsSealedValues(now: now) }

    /// Runs `body` under a lock of the store.
    public func withLock<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T {
        try await base.withLock(name, body)
    }

    /// Saves a service key.
    public func insertServiceKey(_ key: ServiceKeyRecord) async throws { try await base.insertServiceKey(key) }

    /// A service key by secret hash.
    public func serviceKey(secretHash: String) async throws -> ServiceKeyRecord? { try await base.serviceKey(secretHash: secretHash) }

    /// Every service key.
    public func serviceKeys() async throws -> [ServiceKeyRecord] { try await base.serviceKeys() }

    /// Revokes a service key.
    public func revokeServiceKey(id: String, at date: Date) async throws -> Bool {
        defer { serviceKeys.forget(keyId: id) }
        return try await base.revokeServiceKey(id: id, at: date)
    }
}

// Operators' lookups go to the store.
extension CachedStore {
    /// Accounts an operator's search finds.
    public func searchAccounts(_ search: AccountSearch, after: String?, limit: Int) async throws -> [String] {
        try await base.searchAccounts(search, after: after, limit: limit)
    }

    /// An account's live sessions.
    public func sessions(uid: String, now: Date) async throws -> [SessionRecord] { try await base.sessions(uid: uid, now: now) }
    /// How many live sessions an account has.
    public func sessionCount(uid: String, now: Date) async throws -> Int { try await base.sessionCount(uid: uid, now: now) }
    /// The distinct own claims of an account's live sessions.
    public func sessionClaims(uid: String, now: Date, limit: Int) async throws -> [Data] {
        try await base.sessionClaims(uid: uid, now: now, limit: limit)
    }

    /// Records a session's use.
    public func recordSessionUse(familyId: String, _ use: SessionUse) async throws { try await base.recordSessionUse(familyId: familyId, use) }

    /// Sessions' last uses.
    public func sessionUses(familyIds: [String]) async throws -> [String: SessionUse] { try await base.sessionUses(familyIds: familyIds) }
}

// The webhook outbox is never cached.
extension CachedStore {
    /// Leases due outbox entries.
    public func claimOutbox(endpoint: String, now: Date, lease: OutboxLease, limit: Int) async throws -> [OutboxEntry] {
        try await base.claimOutbox(endpoint: endpoint, now: now, lease: lease, limit: limit)
    }

    /// Records a delivery attempt.
    public func completeOutbox(id: String, lease: OutboxLease, outcome: DeliveryOutcome) async throws {
        try await base.completeOutbox(id: id, lease: lease, outcome: outcome)
    }

    /// Lists outbox entries.
    public func outboxEntries(status: OutboxEntry.Status, after: String?, limit: Int) async throws -> [OutboxEntry] {
        try await base.outboxEntries(status: status, after: after, limit: limit)
    }

    /// Makes an entry due again.
    public func redeliverOutbox(id: String, now: Date) async throws -> Bool { try await base.redeliverOutbox(id: id, now: now) }

    /// Drops entries past the retention.
    public func dropOutbox(writtenBefore cutoff: Date, now: Date) async throws -> [String: Int] {
        try await base.dropOutbox(writtenBefore: cutoff, now: now)
    }

    /// The pending backlog.
    public func outboxBacklog() async throws -> (count: Int, oldest: Date?) { try await base.outboxBacklog() }
}

// The audit trail is never cached.
extension CachedStore {
    /// Stores audit events.
    public func appendAudit(_ records: [AuditRecord]) async throws { try await base.appendAudit(records) }

    /// Lists audit events.
    public func auditRecords(uid: String?, event: String?, before: Int64?, limit: Int) async throws -> [AuditRecord] {
        try await base.auditRecords(uid: uid, event: event, before: before, limit: limit)
    }

    /// Drops audit events past the retention.
    public func dropAudit(before cutoff: Date) async throws -> Int { try await base.dropAudit(before: cutoff) }
}

// A key's last use is written and read as it is (the operators' listing).
extension CachedStore {
    /// Records a key's use.
    public func recordServiceKeyUse(id: String, at date: Date) async throws { try await base.recordServiceKeyUse(id: id, at: date) }

    /// Keys' last uses.
    public func serviceKeyUses() async throws -> [String: Date] { try await base.serviceKeyUses() }
}
