import ArgumentParser
import Foundation
import GatehouseCore

/// The token vault's keys from configuration: `GATEHOUSE_ENCRYPTION_KEY` seals,
/// `GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS` (comma-separated) still open what older keys sealed.
/// Either may instead name a file with `…_FILE` (a mounted Kubernetes secret, say). Keys never
/// come from the database.
enum VaultSettings {
    /// The configured keys, current first; `fallback` supplies the current key when none is
    /// configured (the demo's generated key), otherwise a missing key stops the command.
    static func keys(environment: [String: String], fallback: (() throws -> Data)? = nil) throws -> [Data] {
        let current: Data
        if let text = try setting("GATEHOUSE_ENCRYPTION_KEY", environment) {
            current = try key(text, name: "GATEHOUSE_ENCRYPTION_KEY")
        } else if let fallback {
            current = try fallback()
        } else {
            throw ValidationError("GATEHOUSE_ENCRYPTION_KEY (or GATEHOUSE_ENCRYPTION_KEY_FILE) must be set (base64 of 32 bytes)")
        }
        let previous = try (try setting("GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS", environment) ?? "")
            .split(whereSeparator: { $0 == "," || $0.isNewline })
            .map { try key(String($0), name: "GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS") }
        return [current] + previous
    }

    /// `name` from the environment, or the contents of the file `name_FILE` names; both at
    /// once is a mistake worth stopping for.
    private static func setting(_ name: String, _ environment: [String: String]) throws -> String? {
        let direct = environment[name]
        guard let path = environment[name + "_FILE"] else { return direct }
        guard direct == nil else { throw ValidationError("set \(name) or \(name)_FILE, not both") }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            // The path is not secret; the contents are never echoed.
            throw ValidationError("\(name)_FILE: cannot read \(path)")
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func key(_ text: String, name: String) throws -> Data {
        guard let key = Data(base64Encoded: text.trimmingCharacters(in: .whitespaces)), key.count == 32 else {
            throw ValidationError("\(name) must hold base64 of 32 bytes")
        }
        return key
    }
}
