import CurlClient
import Foundation
import GatehouseCore
import GatehouseTestSupport
import Testing

/// Issue #19: secrets as mounted files (`GATEHOUSE_SECRETS_DIR`), the way Kubernetes, Docker
/// Compose and systemd's `LoadCredential=` provide them.
@Suite("Settings from a secrets directory")
struct SecretsDirectoryTests {
    @Test(
        "gatehouse serve reads the encryption key and the GitHub client secret from files (trailing newline dropped, Kubernetes' ..data entries ignored, empty values unset) and signs in; the environment wins over a file; an unreadable folder stops the start naming it"
    )
    func secretsFromFiles() async throws {
        try await withEmulatorAndFolder("gatehouse-secrets") { emulatorURL, folder in
            let secrets = "\(folder)/secrets"
            try FileManager.default.createDirectory(atPath: "\(secrets)/..2026_11_25_data", withIntermediateDirectories: true)
            let key = TokenVault.generateKey()
            func write(_ name: String, _ text: String) throws {
                try Data(text.utf8).write(to: URL(fileURLWithPath: "\(secrets)/\(name)"))
            }
            try write("GATEHOUSE_ENCRYPTION_KEY", key.base64EncodedString() + "\n")
            try write("GATEHOUSE_GITHUB_CLIENT_SECRET", TestDeployment.githubClient.secret + "\n")
            try write("README", "not a setting")
            // Empty is unset, in a file or a variable (Compose passes `${X:-}` as an empty one).
            try write("GATEHOUSE_MICROSOFT_CLIENT_SECRET", "")
            let client = CurlHTTPClient()
            defer { client.shutdown() }

            let fromFiles = try await ServeProcess.start(
                name: "files", database: nil, emulatorURL: emulatorURL, key: key, folder: folder,
                extra: ["GATEHOUSE_SECRETS_DIR": secrets, "GATEHOUSE_MICROSOFT_CLIENT_ID": ""],
                without: ["GATEHOUSE_ENCRYPTION_KEY", "GATEHOUSE_GITHUB_CLIENT_SECRET"])
            let signedIn = try await DatabaseFailoverTests.signIn(client: client, gateway: fromFiles.url)
            #expect(!signedIn.idToken.isEmpty)
            fromFiles.process.stop()

            // A wrong file, the right variable: the variable wins (sign-in still works).
            try write("GATEHOUSE_GITHUB_CLIENT_SECRET", "wrong-secret")
            let overridden = try await ServeProcess.start(
                name: "env", database: nil, emulatorURL: emulatorURL, key: key, folder: folder, extra: ["GATEHOUSE_SECRETS_DIR": secrets])
            _ = try await DatabaseFailoverTests.signIn(client: client, gateway: overridden.url)
            overridden.process.stop()

            do {
                let missing = try await ServeProcess.start(
                    name: "missing", database: nil, emulatorURL: emulatorURL, key: key, folder: folder,
                    extra: ["GATEHOUSE_SECRETS_DIR": "\(folder)/nowhere"])
                missing.process.stop()
                Issue.record("serve started with an unreadable secrets folder")
            } catch let error as FlowError {
                #expect(error.description.contains("GATEHOUSE_SECRETS_DIR"), "\(error)")
            }
        }
    }

    @Test(
        "only the folder's settings files are read: a named pipe or a large file of another name beside them is never opened; a settings file that is no regular file, or larger than 64 KiB, stops the command naming it, unread"
    )
    func readsOnlySettingsFiles() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
        let secrets = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-secrets-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: secrets, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: secrets) }
        try Data("warning\n".utf8).write(to: URL(fileURLWithPath: "\(secrets)/GATEHOUSE_LOG_LEVEL"))
        // Opening a pipe nobody writes to blocks for ever: the command finishing shows it was not opened.
        #expect(mkfifo("\(secrets)/operator-pipe", 0o600) == 0)
        // A 1 GiB file (sparse: it takes no disk) of the operator's: reading it would take 1 GiB of memory.
        #expect(FileManager.default.createFile(atPath: "\(secrets)/backup.img", contents: nil))
        try FileHandle(forWritingTo: URL(fileURLWithPath: "\(secrets)/backup.img")).truncate(atOffset: 1 << 30)

        /// `gatehouse config show` with the folder, killed if it has not finished within 30 s.
        func configShow() async throws -> (status: Int32?, output: String) {
            let child = try SpawnedProcess.start(
                KeysCommandTests.executable.path, ["config", "show"],
                environment: ProcessInfo.processInfo.environment.merging(["GATEHOUSE_SECRETS_DIR": secrets]) { $1 }, output: .pipe)
            let deadline = ContinuousClock.now + .seconds(30)
            while child.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            let finished = !child.isRunning
            if !finished { child.stop() }
            let output = await child.output()
            let status = await child.exited()
            return (finished ? SpawnedProcess.exitCode(status) : nil, output)
        }
        let shown = try await configShow()
        #expect(shown.status == 0, "\(shown.output)")
        // The largest child this test process has waited for (serve processes of other tests
        // stay far below 900 MB; reading the file whole took 1 085 MB): the file was not read.
        var usage = rusage()
        #expect(getrusage(RUSAGE_CHILDREN.rawValue, &usage) == 0)
        #expect(usage.ru_maxrss < 900 << 10, "a child reached \(usage.ru_maxrss / 1024) MB")
        #expect(shown.output.contains("GATEHOUSE_LOG_LEVEL") && shown.output.contains("warning"), "\(shown.output)")

        // A settings name on a pipe, then on an oversized file: refused by what it is, not read.
        try FileManager.default.removeItem(atPath: "\(secrets)/GATEHOUSE_LOG_LEVEL")
        #expect(mkfifo("\(secrets)/GATEHOUSE_LOG_LEVEL", 0o600) == 0)
        let piped = try await configShow()
        #expect(piped.status == 64 || piped.status == 1, "\(piped)")
        #expect(piped.output.contains("GATEHOUSE_LOG_LEVEL is not a regular file"), "\(piped.output)")
        try FileManager.default.removeItem(atPath: "\(secrets)/GATEHOUSE_LOG_LEVEL")
        try Data(count: 65 << 10).write(to: URL(fileURLWithPath: "\(secrets)/GATEHOUSE_LOG_LEVEL"))
        let large = try await configShow()
        #expect(large.output.contains("GATEHOUSE_LOG_LEVEL is not UTF-8 text of at most 65536 bytes"), "\(large.output)")
    }
}
