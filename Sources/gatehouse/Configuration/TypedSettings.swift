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

    /// The value of `name`, or its catalog default when unset: defaults, too, are written in
    /// the catalog alone. Only for settings the catalog gives a default.
    private func textOrDefault(_ name: String) throws -> String {
        if let value = try text(name) { return value }
        guard let fallback = SettingsCatalog.setting(named: name)?.defaultValue else { preconditionFailure("\(name) has no default") }
        return fallback
    }

    /// A whole number, its catalog default when unset.
    func numberOrDefault(_ name: String) throws -> Int {
        guard let number = Int(try textOrDefault(name)) else { preconditionFailure("\(name)'s default is no whole number") }
        return number
    }

    /// A number of seconds as a duration, its catalog default when unset.
    func durationOrDefault(_ name: String) throws -> Duration {
        guard let seconds = TimeInterval(try textOrDefault(name)) else { preconditionFailure("\(name)'s default is no number") }
        return .milliseconds(Int(seconds * 1000))
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
