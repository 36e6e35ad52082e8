import ArgumentParser
import Configuration
import Foundation
import SystemPackage
import Yams

/// The settings every command reads, through swift-configuration, from three places in this
/// order (the first that has a value wins; an empty value is unset):
///
/// 1. the process environment (`GATEHOUSE_PORT`),
/// 2. `GATEHOUSE_SECRETS_DIR`: one file per setting named like its variable — the way
///    Kubernetes mounts a Secret, Docker Compose its `secrets:` and systemd its
///    `LoadCredential=` (`$CREDENTIALS_DIRECTORY`),
/// 3. the configuration file (`--config` or `GATEHOUSE_CONFIG`, YAML or JSON): the variables'
///    names without `GATEHOUSE_`, lower case (`port: 8080`).
///
/// Every value is checked against ``SettingsCatalog`` (a message names the setting and what
/// it accepts, never a secret's value); a key the file does not know stops the command with a
/// suggestion.
enum SettingsEnvironment {
    /// The largest secret file read (keys and client secrets are far smaller).
    static let maximumFileBytes = 64 << 10

    /// The process's settings as `GATEHOUSE_*` variables (other variables passed through).
    static func current(configFile: String? = nil) async throws -> [String: String] {
        try await load(ProcessInfo.processInfo.environment, configFile: configFile).values
    }

    /// The settings from `environment`, its secrets folder and the configuration file.
    static func load(_ environment: [String: String], configFile: String? = nil) async throws -> LoadedSettings {
        // An empty setting is an unset one (Compose passes `${X:-}` as an empty variable).
        let environment = environment.filter { !($0.key.hasPrefix(Setting.prefix) && $0.value.isEmpty) }
        var sources: [(origin: SettingOrigin, lookup: (String, SettingKind) throws -> String?)] = []
        var candidates = Set(environment.keys.filter { $0.hasPrefix(Setting.prefix) })

        let variables = EnvironmentVariablesProvider(
            environmentVariables: environment.filter { $0.key.hasPrefix(Setting.prefix) },
            secretsSpecifier: .dynamic { name, _ in SettingsCatalog.setting(named: name)?.isSecret ?? false })
        sources.append(
            (
                .environment,
                { name, kind in
                    try text(variables, AbsoluteConfigKey(["gatehouse", Setting.fileKey(for: name)]), kind)
                }
            ))

        if let folder = environment["GATEHOUSE_SECRETS_DIR"] {
            // Only the settings files are read (an operator's other files in the folder never
            // are), each checked by what it is and its size before it is opened.
            let contents = try secretFiles(folder)
            candidates.formUnion(contents.keys)
            let files = InMemoryProvider(
                name: "secrets folder",
                values: Dictionary(
                    uniqueKeysWithValues: contents.map { name, text in
                        (AbsoluteConfigKey([name]), ConfigValue(.string(text), isSecret: SettingsCatalog.setting(named: name)?.isSecret ?? true))
                    }))
            sources.append(
                (
                    .secretsDirectory(folder),
                    { name, kind in
                        contents[name] != nil ? try text(files, AbsoluteConfigKey([name]), kind) : nil
                    }
                ))
        }

        if let path = configFile ?? environment["GATEHOUSE_CONFIG"] {
            let keys = try fileKeys(path)
            for key in keys {
                let name = Setting.name(forFileKey: key.replacingOccurrences(of: ".", with: "_"))
                guard !key.contains("."), let setting = SettingsCatalog.setting(named: name), setting.inFile else {
                    let hint = SettingsCatalog.suggestion(for: name).map { "; did you mean \(Setting.fileKey(for: $0))?" } ?? ""
                    throw ValidationError("\(path): unknown key \(key)\(hint)")
                }
                candidates.insert(name)
            }
            let provider = try await fileProvider(path)
            sources.append(
                (
                    .file(path),
                    { name, kind in
                        keys.contains(Setting.fileKey(for: name)) ? try text(provider, AbsoluteConfigKey([Setting.fileKey(for: name)]), kind) : nil
                    }
                ))
        }

        var loaded = LoadedSettings(values: environment)
        let plainNames = SettingsCatalog.all.map(\.name).filter { !$0.contains(Setting.placeholder) }
        for name in candidates.union(plainNames).sorted() {
            guard let setting = SettingsCatalog.setting(named: name) else {
                // Reported as ignored, and so it is: nothing reads it (a provider's lower-case
                // name, `GATEHOUSE_OIDC_corp_ISSUER`, would otherwise switch it on unchecked).
                loaded.unknown.append(name)
                loaded.values[name] = nil
                continue
            }
            loaded.values[name] = nil
            for source in sources {
                let value: String?
                do {
                    value = try source.lookup(name, setting.kind)
                } catch {
                    throw ValidationError("\(name)\(source.origin.fileKeySuffix(for: name)) must be \(setting.kind.accepted)")
                }
                guard let value, !value.isEmpty else { continue }
                try setting.validate(value, origin: source.origin, as: name)
                loaded.values[name] = value
                loaded.origins[name] = source.origin
                break
            }
        }
        return loaded
    }

    /// A provider's value for `key` as text: a scalar as written, a list joined by commas. A
    /// typed file (JSON) may hold the kind's own type (`8080`, `true`, a list) instead of text;
    /// only that one is accepted (JSON's `true` is no port).
    private static func text(_ provider: some ConfigProvider, _ key: AbsoluteConfigKey, _ kind: SettingKind) throws -> String? {
        var lastError: (any Error)?
        let alternative: ConfigType? =
            switch kind {
            case .flag: .bool
            case .port, .count: .int
            case .seconds: .double
            case .list, .keys: .stringArray
            default: nil
            }
        for type in [ConfigType.string] + (alternative.map { [$0] } ?? []) {
            do {
                guard let content = try provider.value(forKey: key, type: type).value?.content else { return nil }
                switch content {
                case .string(let text): return text
                case .stringArray(let list): return list.joined(separator: ",")
                case .int(let number): return String(number)
                case .double(let number): return String(number)
                case .bool(let flag): return String(flag)
                default: return nil
                }
            } catch {
                lastError = error
            }
        }
        throw lastError ?? ValidationError("unreadable")
    }

    /// The settings files in the secrets folder and their text (surrounding white space
    /// dropped, as mounted secrets often end in a newline): files named `GATEHOUSE_…`, or links
    /// to one; other names (Kubernetes' `..data` links, a `README`, anything of the operator's)
    /// are never opened. A settings file that is not a regular file, is larger than
    /// ``maximumFileBytes`` or is not UTF-8 stops the start with its name, never its content;
    /// type and size are checked before the file is opened.
    private static func secretFiles(_ folder: String) throws -> [String: String] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: folder)
        } catch {
            throw ValidationError("GATEHOUSE_SECRETS_DIR: cannot list \(folder)")
        }
        var settings: [String: String] = [:]
        for name in names where isSettingName(name) {
            let path = (folder as NSString).appendingPathComponent(name)
            var info = stat()
            guard stat(path, &info) == 0 else { throw ValidationError("GATEHOUSE_SECRETS_DIR: cannot read \(name)") }
            if info.st_mode & S_IFMT == S_IFDIR { continue }
            guard info.st_mode & S_IFMT == S_IFREG else { throw ValidationError("GATEHOUSE_SECRETS_DIR: \(name) is not a regular file") }
            let tooLarge = ValidationError("GATEHOUSE_SECRETS_DIR: \(name) is not UTF-8 text of at most \(maximumFileBytes) bytes")
            guard info.st_size <= maximumFileBytes else { throw tooLarge }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("GATEHOUSE_SECRETS_DIR: cannot read \(name)")
            }
            guard data.count <= maximumFileBytes, let text = String(data: data, encoding: .utf8) else { throw tooLarge }
            settings[name] = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return settings
    }

    /// `GATEHOUSE_` followed by upper-case letters, digits and underscores.
    static func isSettingName(_ name: String) -> Bool {
        name.hasPrefix(Setting.prefix) && name.count > Setting.prefix.count && name != "GATEHOUSE_SECRETS_DIR"
            && name.utf8.allSatisfy { (0x41...0x5A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "_") }
    }

    /// The configuration file's keys (nested mappings as dotted paths, so a nested key is
    /// reported as unknown rather than silently ignored).
    private static func fileKeys(_ path: String) throws -> Set<String> {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ValidationError("--config / GATEHOUSE_CONFIG: cannot read \(path)")
        }
        let document: Any?
        do {
            // YAML 1.2 reads JSON too; the values themselves are read by swift-configuration.
            document = try Yams.load(yaml: text)
        } catch {
            throw ValidationError("\(path): not valid YAML or JSON")
        }
        guard let document else { return [] }
        guard let mapping = document as? [String: Any] else { throw ValidationError("\(path): the top level must be a mapping of keys to values") }
        var keys = Set<String>()
        func walk(_ mapping: [String: Any], _ prefix: String) {
            for (key, value) in mapping {
                if let nested = value as? [String: Any] { walk(nested, prefix + key + ".") } else { keys.insert(prefix + key) }
            }
        }
        walk(mapping, "")
        return keys
    }

    /// The swift-configuration provider of the file, by its extension.
    private static func fileProvider(_ path: String) async throws -> any ConfigProvider {
        do {
            switch (path as NSString).pathExtension.lowercased() {
            case "yaml", "yml": return try await FileProvider<YAMLSnapshot>(filePath: FilePath(path))
            case "json": return try await FileProvider<JSONSnapshot>(filePath: FilePath(path))
            default: throw ValidationError("\(path): a configuration file ends in .yaml, .yml or .json")
            }
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("\(path): \(error)")
        }
    }
}

/// The loaded settings: values by variable name and where each came from.
struct LoadedSettings {
    /// `GATEHOUSE_*` values (plus the environment's other variables, passed through).
    var values: [String: String]
    /// Where each setting's value came from.
    var origins: [String: SettingOrigin] = [:]
    /// `GATEHOUSE_*` variables (or secret files) that are no setting.
    var unknown: [String] = []
}
