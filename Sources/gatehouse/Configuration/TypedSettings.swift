import ArgumentParser
import Foundation

/// Typed reads of `GATEHOUSE_*` settings, each checked against its ``SettingsCatalog``
/// entry: what a setting accepts (its kind, its range) is written there alone. Every command
/// has already checked the loaded settings (``SettingsEnvironment``), so the check here only
/// fires for a value that did not come through the loader — with the catalog's own message.
struct TypedSettings {
    /// The settings, as ``SettingsEnvironment`` resolved them.
    let environment: [String: String]

    /// The value of `name` when set, checked against its catalog entry.
    func text(_ name: String) throws -> String? {
        guard let value = environment[name] else { return nil }
        guard let setting = SettingsCatalog.setting(named: name) else { preconditionFailure("\(name) is not in the settings catalog") }
        try setting.validate(value, origin: .environment, as: name)
        return value
    }

    /// A number of seconds.
    func seconds(_ name: String) throws -> TimeInterval? {
        try text(name).flatMap(TimeInterval.init)
    }

    /// A number of seconds, as a duration (millisecond precision).
    func duration(_ name: String) throws -> Duration? {
        try seconds(name).map { .milliseconds(Int($0 * 1000)) }
    }

    /// A whole number (a count, a size, a port).
    func number(_ name: String) throws -> Int? {
        try text(name).flatMap { Int($0) }
    }

    /// `true` or `false`.
    func flag(_ name: String) throws -> Bool? {
        try text(name).map { $0 == "true" }
    }

    /// Comma-separated entries, trimmed, empty ones dropped.
    func list(_ name: String) throws -> [String]? {
        try text(name).map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
    }
}
