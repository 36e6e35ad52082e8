import Crypto
import Foundation

/// Encrypts provider tokens at rest with AES-256-GCM.
///
/// Sealed values read `v1.<key id>.<base64url(nonce ‖ ciphertext ‖ tag)>`: the key id lets a
/// later rotation re-encrypt record by record while old records stay readable. The record's
/// identity is authenticated as associated data, so a sealed token copied onto another
/// link does not open.
public struct TokenVault: Sendable {
    private let keys: [String: SymmetricKey]
    /// The key new values are sealed with.
    public let currentKeyID: String

    /// Creates a vault from 32-byte keys; the first is current.
    public init(keys: [Data]) throws {
        guard let first = keys.first else { throw GatehouseError.invalidArgument("the token vault needs at least one key") }
        var byID: [String: SymmetricKey] = [:]
        for key in keys {
            guard key.count == 32 else { throw GatehouseError.invalidArgument("encryption keys must be 32 bytes (AES-256)") }
            byID[Self.keyID(for: key)] = SymmetricKey(data: key)
        }
        self.keys = byID
        self.currentKeyID = Self.keyID(for: first)
    }

    /// A key id derived from the key itself (not secret: 8 hex digits of a hash of a hash).
    public static func keyID(for key: Data) -> String {
        String(SecureRandom.digest(SecureRandom.digest(key.base64EncodedString())).prefix(8))
    }

    /// A fresh random 32-byte key.
    public static func generateKey() -> Data {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
    }

    /// Encrypts `plaintext`, binding it to `context` (e.g. `github.com|583231`).
    public func seal(_ plaintext: Data, context: String) throws -> String {
        guard let key = keys[currentKeyID] else { throw GatehouseError.internalError() }
        let box = try AES.GCM.seal(plaintext, using: key, authenticating: Data(context.utf8))
        guard let combined = box.combined else { throw GatehouseError.internalError() }
        return "v1.\(currentKeyID).\(Base64URL.encode(combined))"
    }

    /// Whether `sealed` is under the current key (nothing for a rotation to do).
    public func isCurrent(_ sealed: String) -> Bool {
        sealed.hasPrefix("v1.\(currentKeyID).")
    }

    /// Decrypts a sealed value; throws if the key is unknown, the value was altered or the
    /// context differs.
    public func open(_ sealed: String, context: String) throws -> Data {
        let parts = sealed.split(separator: ".", maxSplits: 2).map(String.init)
        guard parts.count == 3, parts[0] == "v1", let key = keys[parts[1]], let combined = Base64URL.decode(parts[2]) else {
            throw VaultError.unreadable
        }
        do {
            return try AES.GCM.open(AES.GCM.SealedBox(combined: combined), using: key, authenticating: Data(context.utf8))
        } catch {
            throw VaultError.unreadable
        }
    }

    /// Why a sealed value could not be opened (deliberately without detail).
    public enum VaultError: Error, Sendable {
        /// Unknown key, altered value or wrong context.
        case unreadable
    }
}
