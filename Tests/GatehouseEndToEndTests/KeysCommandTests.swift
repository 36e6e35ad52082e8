import Foundation
@_spi(Testing) import GatehouseCore
import GatehousePostgres
import GatehouseSQLite
import GatehouseTestSupport
import Testing

/// `gatehouse keys` as an operator runs it: the real executable against a data folder or a database URL.
@Suite("gatehouse keys")
struct KeysCommandTests {
    /// The `gatehouse` executable built next to the test bundle.
    static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("gatehouse")
    }

    /// Runs `gatehouse` with `arguments`; returns the exit status and standard output.
    static func run(_ arguments: [String], environment: [String: String] = [:], removing: [String] = []) async throws -> (
        status: Int32, output: String
    ) {
        // The emulator a command reaches runs in the test process: on a loaded run its answers
        // have outlasted the product's 10 s upstream timeout. A test of timeouts sets its own.
        let patient = ["GATEHOUSE_UPSTREAM_TIMEOUT": "60"]
        let child = try SpawnedProcess.start(
            executable.path, arguments,
            environment: ProcessInfo.processInfo.environment.merging(patient) { $1 }.merging(environment) { $1 }.filter {
                !removing.contains($0.key)
            },
            output: .pipe)
        // Far past any command's own run (rotate-encryption waits 70 s): a command that should
        // have stopped but serves fails its test instead of holding the run.
        let watchdog = child.watchdog(after: .seconds(300))
        defer { watchdog.cancel() }
        let output = await child.output()
        return (SpawnedProcess.exitCode(await child.exited()) ?? -1, output)
    }

    @Test(
        "create-service prints the secret alone on the last line; list never shows it; revoke makes it fail (SQLite data folder and PostgreSQL URL)",
        arguments: ["SQLite", "PostgreSQL"])
    func lifecycle(store: String) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build the gatehouse product first (swift build)")
        let location: [String]
        var environment: [String: String] = [:]
        let storage: any GatehouseStorage
        if store == "SQLite" {
            let folder = try TestScratch.folder("keys")
            location = ["--data-dir", folder]
            storage = try SQLiteStorage(path: folder + "/gatehouse.sqlite")
        } else {
            let url = try await PostgresTestServer.freshDatabase()
            // In the environment, as a URL that may carry a password must be given.
            location = []
            environment = ["GATEHOUSE_DATABASE_URL": url]
            storage = try PostgresTestServer.store(url)
        }
        let created = try await Self.run(
            ["keys", "create-service", "billing", "--scopes", "profile:read,photo:read"] + location, environment: environment)
        #expect(created.status == 0)
        let secret = try #require(created.output.split(separator: "\n").last.map(String.init))
        #expect(secret.hasPrefix("ghsk_") && !secret.contains(" "))

        let listed = try await Self.run(["keys", "list"] + location, environment: environment)
        #expect(listed.output.contains("billing") && listed.output.contains("active"))
        #expect(!listed.output.contains(secret))
        let id = try #require(listed.output.split(separator: "\t").first.map(String.init))

        // A name is plain text: a control sequence in it would reach the operator's terminal.
        let hiding = try await Self.run(["keys", "create-service", "x\u{1B}[8m", "--scopes", "profile:read"] + location, environment: environment)
        #expect(hiding.status != 0 && hiding.output.contains("plain text"), "\(hiding.output)")
        // One stored without that rule is listed with its controls shown, not obeyed.
        try await storage.insertServiceKey(
            ServiceKeyRecord(
                id: "sk_stored", name: "old\\u{1B}\r\u{1B}[2K\u{202E}", secretHash: "unused", scopes: ["profile:read"], createdAt: Date()))
        let shown = try await Self.run(["keys", "list"] + location, environment: environment)
        let storedLine = shown.output.split(separator: "\n").first { $0.hasPrefix("sk_stored\t") }.map(String.init) ?? ""
        #expect(storedLine.hasPrefix("sk_stored\told\\\\u{1B}\\u{D}\\u{1B}[2K\\u{202E}\t"), "\(shown.output)")
        #expect(!shown.output.unicodeScalars.contains("\u{1B}"))

        let service = ServiceKeyService(storage: storage)
        let key = try await service.authorize(secret: secret, scope: "photo:read")
        #expect(key.id == id)

        #expect(try await Self.run(["keys", "revoke", id] + location, environment: environment).status == 0)
        #expect(try await Self.run(["keys", "revoke", id] + location, environment: environment).status != 0)
        await #expect(throws: GatehouseError.self) { try await service.authorize(secret: secret, scope: "photo:read") }
        #expect(try await Self.run(["keys", "create-service", "x", "--scopes", "profile:write"] + location, environment: environment).status != 0)
        // The command's changes are in the stored trail the activity listing reads, once each.
        let trail = try await storage.auditRecords(uid: nil, event: nil, before: nil, limit: 10)
        #expect(trail.map(\.event) == ["service-key.revoked", "service-key.created"], "\(trail)")
        let holds = trail.allSatisfy { $0.actor == "command-line" && $0.keyId == id }
        #expect(holds, "\(trail)")
    }

    @Test(
        "rotate-encryption re-seals tokens under GATEHOUSE_ENCRYPTION_KEY with the old key in GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS; unreadable links fail it"
    )
    func rotateEncryption() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build the gatehouse product first (swift build)")
        let folder = try TestScratch.folder("rotate")
        let storage = try SQLiteStorage(path: folder + "/gatehouse.sqlite")
        try await storage.migrate()
        let (old, new) = (TokenVault.generateKey(), TokenVault.generateKey())
        let sealed = try await TokenVault(keys: [old]).seal(Data(#"{"accessToken":"t"}"#.utf8), context: "provider-tokens|github.com|7")
        try await storage.createAccount(
            AccountRecord(uid: "u7", createdAt: Date(), lastSignInAt: Date()),
            firstLink: ProviderLinkRecord(
                uid: "u7", providerId: "github.com", federatedId: "7", profileJSON: Data("{}".utf8), sealedTokens: sealed, linkedAt: Date(),
                updatedAt: Date()))
        let keys = ["GATEHOUSE_ENCRYPTION_KEY": new.base64EncodedString()]
        // The instances' reload interval, shortened so the command waits 0.4 s, not 60.
        let command = ["keys", "rotate-encryption", "--data-dir", folder, "--reload-seconds", "0.2"]
        // Without the old key the link cannot be opened: the command says so and fails.
        let refused = try await Self.run(command, environment: keys)
        #expect(refused.status != 0)
        #expect(refused.output.contains("1 unreadable"))
        let rotated = try await Self.run(command, environment: keys.merging(["GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS": old.base64EncodedString()]) { $1 })
        #expect(rotated.status == 0)
        #expect(rotated.output.contains("1 re-encrypted"))
        #expect(rotated.output.contains("Nothing remains under older keys."))
        // The link now sits under a data key wrapped by the new configured key alone.
        let link = try #require(try await storage.link(providerId: "github.com", federatedId: "7"))
        #expect(link.sealedTokens.hasPrefix("v2."))
        let vault = try TokenVault(keys: [new], store: storage)
        #expect(try await vault.open(link.sealedTokens, context: "provider-tokens|github.com|7") == Data(#"{"accessToken":"t"}"#.utf8))
        // The refused run's data key was used by nothing and is gone; one remains.
        #expect(try await storage.dataKeys().count == 1)
        // Both runs are in the stored trail, each naming the data key it sealed with.
        let trail = try await storage.auditRecords(uid: nil, event: "encryption-key.rotated", before: nil, limit: 10)
        let holds = trail.count == 2 && trail.allSatisfy { $0.actor == "command-line" && $0.keyId?.isEmpty == false }
        #expect(holds, "\(trail)")
    }

    @Test(
        "the encryption key from a file (GATEHOUSE_ENCRYPTION_KEY_FILE, trailing newline allowed); both the variable and the file, or an unreadable file, stop the command"
    )
    func encryptionKeyFromFile() async throws {
        let folder = try TestScratch.folder("keyfile")
        let key = TokenVault.generateKey()
        let keyFile = folder + "/encryption-key"
        try Data((key.base64EncodedString() + "\n").utf8).write(to: URL(fileURLWithPath: keyFile))

        let rotated = try await Self.run(["keys", "rotate-signing", "--data-dir", folder], environment: ["GATEHOUSE_ENCRYPTION_KEY_FILE": keyFile])
        #expect(rotated.status == 0)
        let storage = try SQLiteStorage(path: folder + "/gatehouse.sqlite")
        let record = try #require(try await storage.signingKeys().first)
        // Sealed with a data key wrapped by the file's key (not the demo folder's generated one).
        let vault = try TokenVault(keys: [key], store: storage)
        #expect(record.sealedPrivateKey.hasPrefix("v2."))
        await #expect(throws: Never.self) { try await vault.open(record.sealedPrivateKey, context: "signing-key|\(record.kid)") }
        let trail = try await storage.auditRecords(uid: nil, event: nil, before: nil, limit: 10)
        #expect(trail.map(\.event) == ["signing-key.rotated"] && trail.first?.keyId == record.kid, "\(trail)")

        let both = try await Self.run(
            ["keys", "rotate-signing", "--data-dir", folder],
            environment: ["GATEHOUSE_ENCRYPTION_KEY_FILE": keyFile, "GATEHOUSE_ENCRYPTION_KEY": key.base64EncodedString()])
        #expect(both.status != 0)
        let missing = try await Self.run(
            ["keys", "rotate-signing", "--data-dir", folder], environment: ["GATEHOUSE_ENCRYPTION_KEY_FILE": folder + "/absent"])
        #expect(missing.status != 0)
        #expect(try await SQLiteStorage(path: folder + "/gatehouse.sqlite").signingKeys().count == 1)
    }

    /// The variables that configure an encryption key: without them a data folder keeps its own.
    static let keyVariables = ["GATEHOUSE_ENCRYPTION_KEY", "GATEHOUSE_ENCRYPTION_KEY_FILE", "GATEHOUSE_DATABASE_URL"]

    /// The permission bits of a file or folder.
    static func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? -1) & 0o777
    }

    @Test("a data folder the CLI creates is 0700 and the demo key, the SQLite file and its -wal/-shm are 0600")
    func dataFolderIsPrivate() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build the gatehouse product first (swift build)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-modes-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // No GATEHOUSE_ENCRYPTION_KEY: the folder keeps the demo's key, as `gatehouse demo` does.
        let rotated = try await Self.run(["keys", "rotate-signing", "--data-dir", folder], removing: Self.keyVariables)
        #expect(rotated.status == 0)
        #expect(try Self.mode(folder) == 0o700)
        for name in ["encryption.key", "gatehouse.sqlite", "gatehouse.sqlite-wal", "gatehouse.sqlite-shm"] {
            let path = (folder as NSString).appendingPathComponent(name)
            guard FileManager.default.fileExists(atPath: path) else { continue }
            #expect(try Self.mode(path) == 0o600, "\(name)")
        }
        #expect(try Self.mode((folder as NSString).appendingPathComponent("gatehouse.sqlite")) == 0o600)
    }

    @Test(
        "without a configured key, a store that the demo did not make gets no key made up: rotate-signing and demo stop and write no encryption.key"
    )
    func deploymentStoreNeedsItsKey() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build the gatehouse product first (swift build)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-deployed-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // A deployment's folder: migrated by its service, whose key is configured elsewhere.
        let migrated = try await Self.run(["migrate", "--data-dir", folder], removing: Self.keyVariables)
        #expect(migrated.status == 0, "\(migrated.output)")
        let rotated = try await Self.run(["keys", "rotate-signing", "--data-dir", folder], removing: Self.keyVariables)
        #expect(rotated.status != 0 && rotated.output.contains("GATEHOUSE_ENCRYPTION_KEY is required"), "\(rotated.output)")
        // Nor does the demo, which would leave the key file the next command trusts.
        let demo = try await Self.run(["demo", "--data-dir", folder, "--port", "0", "--emulator-port", "0"], removing: Self.keyVariables)
        #expect(demo.status != 0 && demo.output.contains("GATEHOUSE_ENCRYPTION_KEY is required"), "\(demo.output.suffix(600))")
        #expect(!FileManager.default.fileExists(atPath: (folder as NSString).appendingPathComponent("encryption.key")))
        #expect(try await SQLiteStorage(path: folder + "/gatehouse.sqlite").signingKeys().isEmpty)
    }

    @Test("a database URL with a password is refused on the command line, where every local user can read it, and not repeated")
    func noPasswordInArguments() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build the gatehouse product first (swift build)")
        for command in [["keys", "list"], ["migrate"], ["serve"]] {
            let refused = try await Self.run(command + ["--database-url", "postgres://gh:S3CRET-pw@127.0.0.1:9/gatehouse"])
            #expect(refused.status != 0 && refused.output.contains("--database-url must not carry a password"), "\(command): \(refused.output)")
            #expect(!refused.output.contains("S3CRET-pw"), "\(command): \(refused.output)")
        }
    }

    @Test("an existing key file that does not parse is never replaced: the command stops and the file is unchanged")
    func unreadableKeyFileIsKept() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build the gatehouse product first (swift build)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-keyfile-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let keyPath = (folder as NSString).appendingPathComponent("encryption.key")
        // An operator's comment line makes the file unreadable as a key; it must survive.
        let original = "# demo key, keep\n" + TokenVault.generateKey().base64EncodedString() + "\n"
        try original.write(toFile: keyPath, atomically: true, encoding: .utf8)
        let rotated = try await Self.run(["keys", "rotate-signing", "--data-dir", folder], removing: Self.keyVariables)
        #expect(rotated.status != 0)
        #expect(try String(contentsOfFile: keyPath, encoding: .utf8) == original)
    }
}

extension KeysCommandTests {
    @Test("gatehouse --version prints the build's version, the one the API description states")
    func version() async throws {
        let (status, output) = try await Self.run(["--version"])
        #expect(status == 0)
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == Gatehouse.version)
        let specURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../OpenAPI/openapi.yaml")
        let description = try String(contentsOf: specURL, encoding: .utf8)
        #expect(description.contains("\n  version: \(Gatehouse.version)\n"))
    }
}
