import ArgumentParser
import Foundation

/// The `GATEHOUSE_*` settings every command reads: the process environment, plus one file per
/// setting in `GATEHOUSE_SECRETS_DIR` — the way Kubernetes mounts a Secret, Docker Compose its
/// `secrets:` and systemd its `LoadCredential=` (`$CREDENTIALS_DIRECTORY`). A variable set in
/// the environment wins over a file of the same name. An empty value, in either, is unset.
enum SettingsEnvironment {
    /// The largest secret file read (keys and client secrets are far smaller).
    static let maximumFileBytes = 64 << 10

    /// The process's settings.
    static func current() throws -> [String: String] {
        try merged(ProcessInfo.processInfo.environment)
    }

    /// `environment` with the secrets directory's files added: each regular file (or link to
    /// one) named `GATEHOUSE_…`, its content without the trailing line break. Other names
    /// (Kubernetes' `..data` links, a `README`) are ignored; an unreadable or oversized file
    /// stops the start with its name, never its content.
    static func merged(_ environment: [String: String]) throws -> [String: String] {
        // An empty setting is an unset one (Compose passes `${X:-}` as an empty variable).
        let environment = environment.filter { !($0.key.hasPrefix("GATEHOUSE_") && $0.value.isEmpty) }
        guard let folder = environment["GATEHOUSE_SECRETS_DIR"], !folder.isEmpty else { return environment }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: folder)
        } catch {
            throw ValidationError("GATEHOUSE_SECRETS_DIR: cannot list \(folder)")
        }
        var merged = environment
        for name in names.sorted() where isSettingName(name) && environment[name] == nil {
            let path = (folder as NSString).appendingPathComponent(name)
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue else { continue }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("GATEHOUSE_SECRETS_DIR: cannot read \(name)")
            }
            guard data.count <= maximumFileBytes, let text = String(data: data, encoding: .utf8) else {
                throw ValidationError("GATEHOUSE_SECRETS_DIR: \(name) is not UTF-8 text of at most \(maximumFileBytes) bytes")
            }
            var value = Substring(text)
            while let last = value.last, last == "\n" || last == "\r" { value = value.dropLast() }
            if !value.isEmpty { merged[name] = String(value) }
        }
        return merged
    }

    /// `GATEHOUSE_` followed by upper-case letters, digits and underscores.
    static func isSettingName(_ name: String) -> Bool {
        name.hasPrefix("GATEHOUSE_") && name.count > 10 && name != "GATEHOUSE_SECRETS_DIR"
            && name.utf8.allSatisfy { (0x41...0x5A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "_") }
    }
}
