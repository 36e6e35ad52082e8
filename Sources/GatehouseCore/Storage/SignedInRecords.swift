import Foundation

/// How a signed-in request names its session: by its cookie (the hash kept) or by the
/// refresh-token family a gateway ID token carries (`sid`).
public enum SessionKey: Sendable, Hashable {
    /// The SHA-256 hash of the session cookie.
    case cookieHash(String)
    /// The refresh-token family of the session.
    case family(String)
}

/// A live session with its account and the account's links, read together: what every
/// signed-in request needs before it can answer.
public struct SignedInRecords: Sendable, Equatable {
    /// The session, not expired at the time of the read.
    public var session: SessionRecord
    /// Its account (`nil` only while the account is being deleted).
    public var account: AccountRecord?
    /// The account's links, oldest first.
    public var links: [ProviderLinkRecord]

    /// The three records.
    public init(session: SessionRecord, account: AccountRecord?, links: [ProviderLinkRecord]) {
        self.session = session
        self.account = account
        self.links = links
    }
}

extension GatehouseStorage {
    /// The default: three reads (a store that can do better reads once).
    public func signedIn(_ key: SessionKey, now: Date) async throws -> SignedInRecords? {
        let found: SessionRecord?
        switch key {
        case .cookieHash(let hash): found = try await session(idHash: hash, now: now)
        case .family(let family): found = try await session(familyId: family, now: now)
        }
        guard let session = found else { return nil }
        return SignedInRecords(session: session, account: try await account(uid: session.uid), links: try await links(uid: session.uid))
    }
}
