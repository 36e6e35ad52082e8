import ArgumentParser
import Foundation
import GatehouseServer

/// `gatehouse config`: the effective configuration and the reference of every setting.
struct ConfigCommand: AsyncParsableCommand {
    /// The command's name, help and subcommands.
    static let configuration = CommandConfiguration(
        commandName: "config", abstract: "Show the effective configuration, or the reference of every setting.",
        subcommands: [Show.self, Reference.self, Metrics.self])

    /// `gatehouse config show`.
    struct Show: AsyncParsableCommand {
        /// The command's name and help.
        static let configuration = CommandConfiguration(
            abstract: "Print every setting that has a value, where it came from, secrets redacted; exit 1 on an invalid one.",
            discussion: "Sources, first wins: the environment, GATEHOUSE_SECRETS_DIR, the configuration file, the default.")

        /// Where the configuration file is.
        @OptionGroup var store: StoreOptions

        /// Prints the table.
        func run() async throws {
            let loaded = try await SettingsEnvironment.load(ProcessInfo.processInfo.environment, configFile: store.config)
            print(Self.render(loaded), terminator: "")
        }

        /// One line per setting with a value: name, value (or `<redacted>`), source.
        static func render(_ loaded: LoadedSettings) -> String {
            var rows: [(String, String, String)] = []
            var shown = Set<String>()
            for (name, origin) in loaded.origins.sorted(by: { $0.key < $1.key }) {
                guard let setting = SettingsCatalog.setting(named: name), let value = loaded.values[name] else { continue }
                rows.append((name, setting.shown(value), origin.label))
                shown.insert(name)
            }
            for setting in SettingsCatalog.all where !shown.contains(setting.name) {
                guard let fallback = setting.defaultValue, !setting.name.contains(Setting.placeholder) else { continue }
                rows.append((setting.name, fallback, SettingOrigin.defaultValue.label))
            }
            rows.sort { $0.0 < $1.0 }
            let nameWidth = rows.map(\.0.count).max() ?? 0
            let valueWidth = min(rows.map(\.1.count).max() ?? 0, 48)
            var text = ""
            for (name, value, origin) in rows {
                text += name.padding(toLength: nameWidth, withPad: " ", startingAt: 0) + "  "
                text += value.padding(toLength: max(valueWidth, value.count), withPad: " ", startingAt: 0) + "  " + origin + "\n"
            }
            for name in loaded.unknown {
                let hint = SettingsCatalog.suggestion(for: name).map { " (did you mean \($0)?)" } ?? ""
                text += "ignored: \(name) is not a setting\(hint)\n"
            }
            return text
        }
    }

    /// `gatehouse config reference`.
    struct Reference: ParsableCommand {
        /// The command's name and help.
        static let configuration = CommandConfiguration(
            abstract: "Print the reference of every setting (the Configuration article's table, in Markdown).")

        /// Prints the table.
        func run() {
            print(SettingsCatalog.markdownTable(), terminator: "")
        }
    }

    /// `gatehouse config metrics`.
    struct Metrics: ParsableCommand {
        /// The command's name and help.
        static let configuration = CommandConfiguration(
            abstract: "Print the reference of every metric the gateway exports (the Operating article's metrics table, in Markdown).")

        /// Prints the table.
        func run() {
            print(MetricsCatalog.markdownTable(), terminator: "")
        }
    }
}
