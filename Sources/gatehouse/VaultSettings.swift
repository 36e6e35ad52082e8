import ArgumentParser
import Foundation
import GatehouseCore

/// The token vault's keys from the environment: `GATEHOUSE_ENCRYPTION_KEY` seals,
/// `GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS` (comma-separated) still open what older keys sealed.
/// Keys never come from the database.
enum VaultSettings {
    /// The vault; `fallback` supplies the current key when the variable is unset (the demo's
    /// generated key), otherwise a missing key stops the command.
    static func vault(environment: [String: String], fallback: (() throws -> Data)? = nil) throws -> TokenVault {
        let current: Data
        if let text = environment["GATEHOUSE_ENCRYPTION_KEY"] {
            current = try key(text, name: "GATEHOUSE_ENCRYPTION_KEY")
        } else if let fallback {
            current = try fallback()
        } else {
            throw ValidationError("GATEHOUSE_ENCRYPTION_KEY must be set (base64 of 32 bytes)")
        }
        let previous = try (environment["GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS"] ?? "").split(separator: ",")
            .map { try key(String($0), name: "GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS") }
        return try TokenVault(keys: [current] + previous)
    }

    private static func key(_ text: String, name: String) throws -> Data {
        guard let key = Data(base64Encoded: text.trimmingCharacters(in: .whitespaces)), key.count == 32 else {
            throw ValidationError("\(name) must hold base64 of 32 bytes")
        }
        return key
    }
}
