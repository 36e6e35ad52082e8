import Foundation

/// A data key of the token vault: the AES-256 key that seals provider tokens and signing
/// keys, itself sealed ("wrapped") by a key-encryption key from the configuration. The
/// database alone therefore opens nothing.
public struct DataKeyRecord: Sendable, Equatable {
    /// The key id, as it appears in every value the key seals (`v2.<id>.…`).
    public var id: String
    /// The key, sealed by a configured key-encryption key (`v1.<configured key id>.…`).
    public var wrappedKey: String
    /// When the key was created; the newest active one seals.
    public var createdAt: Date

    /// Creates a record.
    public init(id: String, wrappedKey: String, createdAt: Date) {
        self.id = id
        self.wrappedKey = wrappedKey
        self.createdAt = createdAt
    }
}
