import CurlClient
import Foundation
import GatehouseCore
import Testing

/// Issue #19: secrets as mounted files (`GATEHOUSE_SECRETS_DIR`), the way Kubernetes, Docker
/// Compose and systemd's `LoadCredential=` provide them.
@Suite("Settings from a secrets directory")
struct SecretsDirectoryTests {
    @Test(
        "gatehouse serve reads the encryption key and the GitHub client secret from files (trailing newline dropped, Kubernetes' ..data entries ignored, empty values unset) and signs in; the environment wins over a file; an unreadable folder stops the start naming it"
    )
    func secretsFromFiles() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
        try await withRunningEmulator { emulatorURL in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-secrets-\(UUID().uuidString)").path
            let secrets = "\(folder)/secrets"
            try FileManager.default.createDirectory(atPath: "\(secrets)/..2026_11_25_data", withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
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
}
