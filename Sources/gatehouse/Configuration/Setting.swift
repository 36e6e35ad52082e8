import ArgumentParser
import Foundation
import GatehouseServer

/// One configuration setting: its variable, its key in a configuration file, what it accepts,
/// its default and what it means. ``SettingsCatalog`` lists every one; the loader, `gatehouse
/// config show` and the Configuration article's table all read that list.
struct Setting: Sendable {
    /// The environment variable (and secrets-folder file) name: `GATEHOUSE_PORT`. A per-provider
    /// setting holds the placeholder `<NAME>`: `GATEHOUSE_OIDC_<NAME>_ISSUER`.
    let name: String
    /// What the setting accepts.
    let kind: SettingKind
    /// The default, as written in the configuration (`nil`: unset unless configured).
    let defaultValue: String?
    /// Whether a configuration file may set it (`GATEHOUSE_CONFIG` and `GATEHOUSE_SECRETS_DIR`
    /// say where the file and the folder are, so they come from the environment only).
    let inFile: Bool
    /// One line for the Configuration article's table and `config show`.
    let summary: String

    /// A setting.
    init(_ name: String, _ kind: SettingKind, default defaultValue: String? = nil, inFile: Bool = true, _ summary: String) {
        self.name = name
        self.kind = kind
        self.defaultValue = defaultValue
        self.inFile = inFile
        self.summary = summary
    }

    /// The key in a configuration file: the variable's name without `GATEHOUSE_`, lower case
    /// (`port`, `github_client_secret`, `oidc_<name>_issuer`).
    var fileKey: String { Self.fileKey(for: name) }

    /// Whether the value is redacted wherever configuration is printed or logged.
    var isSecret: Bool { kind.isSecret }

    /// `value` as configuration is printed: `<redacted>` for a secret, a receiver's URL as
    /// its origin only.
    func shown(_ value: String) -> String {
        guard isSecret else { return value }
        guard case .receiverURL = kind, let parts = URLComponents(string: value), let scheme = parts.scheme, let host = parts.host, !host.isEmpty
        else { return "<redacted>" }
        let named = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme.lowercased())://\(named)\(parts.port.map { ":\($0)" } ?? "")/…"
    }

    /// The file key of a variable name.
    static func fileKey(for name: String) -> String {
        String(name.dropFirst(prefix.count)).lowercased()
    }

    /// The variable name of a file key.
    static func name(forFileKey key: String) -> String {
        prefix + key.uppercased()
    }

    /// Every setting's variable starts with this.
    static let prefix = "GATEHOUSE_"

    /// The placeholder of a per-provider setting's name.
    static let placeholder = "<NAME>"

    /// The concrete names this setting's pattern matches, given candidate `names`: the name
    /// itself for a plain setting; for a `<NAME>` pattern every candidate with a non-empty,
    /// upper-case `NAME` in its place.
    func matches(_ candidate: String) -> Bool {
        guard let range = name.range(of: Self.placeholder) else { return candidate == name }
        let head = name[..<range.lowerBound]
        let tail = name[range.upperBound...]
        guard candidate.hasPrefix(head), candidate.hasSuffix(tail), candidate.count > head.count + tail.count else { return false }
        let middle = candidate.dropFirst(head.count).dropLast(tail.count)
        return middle.utf8.allSatisfy { (0x41...0x5A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "_") }
    }

    /// Checks `value` against ``kind``; the message names the setting (and, for a value from
    /// a file, its key) and what is accepted — and echoes the value only when it is not secret.
    func validate(_ value: String, origin: SettingOrigin, as concreteName: String) throws {
        guard let problem = kind.problem(with: value) else { return }
        let whereFrom = origin.fileKeySuffix(for: concreteName)
        let shown = isSecret ? "" : ", not \(value.debugDescription)"
        throw ValidationError("\(concreteName)\(whereFrom) must be \(problem)\(shown)")
    }
}

/// What a setting accepts; the loader checks every configured value against it.
enum SettingKind: Sendable {
    /// Any text.
    case text
    /// Text that is never printed (client secrets).
    case secret
    /// An absolute `http(s)` URL.
    case url
    /// The URL of a receiver of the gateway's calls (a hook, a webhook endpoint): its path and
    /// query may carry the receiver's token (Slack's and many others' URLs do), so only its
    /// origin is ever printed.
    case receiverURL
    /// A database URL, which may hold a password: never printed.
    case databaseURL
    /// A file or folder path.
    case path
    /// A TCP port, 0–65535.
    case port
    /// `host:port` or `off`.
    case address
    /// `true` or `false`.
    case flag
    /// A number of seconds in a range.
    case seconds(ClosedRange<Double>)
    /// A whole number at least `minimum`, at most `maximum`.
    case count(minimum: Int, maximum: Int = .max)
    /// Comma-separated entries (a list in a file).
    case list
    /// One of these words.
    case choice([String])
    /// Base64 of 32 bytes; never printed.
    case key
    /// Comma-separated base64 keys; never printed.
    case keys

    /// The longest duration a setting of seconds accepts: a hundred years of 365 days, "never"
    /// for each. Longer ones would overflow where the gateway turns them into dates and
    /// durations (PostgreSQL's microseconds, Swift's `Duration`) and stop the process.
    static let longestSeconds = 3_153_600_000.0
    /// `longestSeconds` for settings of whole seconds.
    static let longestWholeSeconds = Int(longestSeconds)

    /// Whether values of this kind are redacted.
    var isSecret: Bool {
        switch self {
        case .secret, .databaseURL, .key, .keys, .receiverURL: true
        default: false
        }
    }

    /// What the Configuration article's table says the setting accepts.
    var accepted: String {
        switch self {
        case .text: "text"
        case .secret: "text (secret)"
        case .url: "URL"
        case .receiverURL: "URL (only its origin is shown)"
        case .databaseURL: "`postgres://` URL (secret)"
        case .path: "path"
        case .port: "port"
        case .address: "`host:port` or `off`"
        case .flag: "`true` / `false`"
        case .seconds(let range):
            range.upperBound == Self.longestSeconds
                ? "seconds ≥ \(Self.number(range.lowerBound)) (up to 100 years)"
                : "seconds \(Self.number(range.lowerBound))–\(Self.number(range.upperBound))"
        case .count(let minimum, let maximum): maximum == .max ? "whole number ≥ \(minimum)" : "whole number \(minimum)–\(maximum)"
        case .list: "comma-separated list"
        case .choice(let words): words.map { "`\($0)`" }.joined(separator: " / ")
        case .key: "base64 of 32 bytes (secret)"
        case .keys: "comma-separated keys (secret)"
        }
    }

    /// Why `value` is not accepted (what is), or `nil` when it is.
    func problem(with value: String) -> String? {
        switch self {
        case .text, .secret, .path, .list: return nil
        case .url, .receiverURL:
            guard let url = URL(string: value), let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", url.host != nil
            else { return "an absolute http(s) URL" }
            return nil
        case .databaseURL:
            return value.hasPrefix("postgres://") || value.hasPrefix("postgresql://") ? nil : "a postgres:// URL"
        case .port:
            guard let number = Int(value), (0...65535).contains(number) else { return "a port number from 0 to 65535" }
            return nil
        case .address:
            return value == "off" || OperationsAddress(parsing: value) != nil ? nil : "host:port (127.0.0.1:9090, [::1]:9090) or off"
        case .flag:
            return value == "true" || value == "false" ? nil : "true or false"
        case .seconds(let range):
            guard let seconds = Double(value), seconds.isFinite, range.contains(seconds) else { return "a number of \(accepted)" }
            return nil
        case .count(let minimum, let maximum):
            guard let number = Int(value), (minimum...maximum).contains(number) else { return "a \(accepted)" }
            return nil
        case .choice(let words):
            return words.contains(value) ? nil : "one of \(words.joined(separator: ", "))"
        case .key:
            return Self.isKey(value) ? nil : "base64 of 32 bytes"
        case .keys:
            let entries = value.split(whereSeparator: { $0 == "," || $0.isNewline })
            return entries.allSatisfy({ Self.isKey(String($0)) }) ? nil : "comma-separated base64 keys of 32 bytes"
        }
    }

    private static func isKey(_ text: String) -> Bool {
        Data(base64Encoded: text.trimmingCharacters(in: .whitespaces))?.count == 32
    }

    private static func number(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}

/// Where a setting's value came from, for `config show` and error messages.
enum SettingOrigin: Sendable, Equatable {
    /// The process environment.
    case environment
    /// A file in `GATEHOUSE_SECRETS_DIR`.
    case secretsDirectory(String)
    /// The configuration file.
    case file(String)
    /// The catalog's default.
    case defaultValue

    /// What `config show` prints.
    var label: String {
        switch self {
        case .environment: "environment"
        case .secretsDirectory(let folder): "secrets folder \(folder)"
        case .file(let path): "file \(path)"
        case .defaultValue: "default"
        }
    }

    /// ` (key in FILE)` for a value from the configuration file; nothing otherwise.
    func fileKeySuffix(for name: String) -> String {
        guard case .file(let path) = self else { return "" }
        return " (\(Setting.fileKey(for: name)) in \(path))"
    }
}
