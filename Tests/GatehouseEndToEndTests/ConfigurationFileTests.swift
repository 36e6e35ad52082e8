import CurlClient
import Foundation
import GatehouseCore
import GatehouseTestSupport
import Testing

/// Issue #19: one configuration file (YAML or JSON, `--config` / `GATEHOUSE_CONFIG`) read
/// through swift-configuration, the environment and the secrets folder overriding it, every
/// key validated, unknown keys refused with a suggestion, `gatehouse config show` and the
/// Configuration article's table generated from the code.
@Suite("Configuration file")
struct ConfigurationFileTests {
    /// A fresh folder for one test.
    private static func folder() throws -> String {
        try TestScratch.folder("gatehouse-config")
    }

    private static func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    @Test(
        "serve takes its GitHub client, URLs and allow-list from a YAML file and signs in; a secrets-folder file and an environment variable each win over the file's value"
    )
    func serveFromFile() async throws {
        try await withEmulatorAndFolder("gatehouse-config") { emulatorURL, folder in
            let client = TestDeployment.githubClient
            // The file's client secret is wrong: sign-in only works where something overrides it.
            try Self.write(
                """
                # Gatehouse, configured by file
                public_url: \(ServeProcess.publicURL)
                return_to_allowlist:
                  - \(TestDeployment.returnTo)
                github_client_id: \(client.id)
                github_client_secret: not-the-secret
                github_authorize_url: \(emulatorURL)/github/login/oauth/authorize
                github_token_url: \(emulatorURL)/github/login/oauth/access_token
                github_api_url: \(emulatorURL)/github-api
                auth_rate_limit: 0
                upstream_timeout: 25

                """, to: "\(folder)/gatehouse.yaml")
            let fromFile: Set<String> = [
                "GATEHOUSE_PUBLIC_URL", "GATEHOUSE_RETURN_TO_ALLOWLIST", "GATEHOUSE_GITHUB_CLIENT_ID", "GATEHOUSE_GITHUB_CLIENT_SECRET",
                "GATEHOUSE_GITHUB_AUTHORIZE_URL", "GATEHOUSE_GITHUB_TOKEN_URL", "GATEHOUSE_GITHUB_API_URL", "GATEHOUSE_AUTH_RATE_LIMIT",
                "GATEHOUSE_UPSTREAM_TIMEOUT",
            ]
            let key = TokenVault.generateKey()
            let http = CurlHTTPClient()
            defer { http.shutdown() }

            // The environment's client secret wins over the file's.
            let overridden = try await ServeProcess.start(
                name: "env", database: nil, emulatorURL: emulatorURL, key: key, folder: folder,
                extra: ["GATEHOUSE_CONFIG": "\(folder)/gatehouse.yaml", "GATEHOUSE_GITHUB_CLIENT_SECRET": client.secret],
                without: fromFile.subtracting(["GATEHOUSE_GITHUB_CLIENT_SECRET"]))
            #expect(!(try await DatabaseFailoverTests.signIn(client: http, gateway: overridden.url)).idToken.isEmpty)
            overridden.process.stop()

            // A secrets-folder file wins over the file too.
            try FileManager.default.createDirectory(atPath: "\(folder)/secrets", withIntermediateDirectories: true)
            try Self.write(client.secret + "\n", to: "\(folder)/secrets/GATEHOUSE_GITHUB_CLIENT_SECRET")
            let mounted = try await ServeProcess.start(
                name: "mounted", database: nil, emulatorURL: emulatorURL, key: key, folder: folder,
                extra: ["GATEHOUSE_CONFIG": "\(folder)/gatehouse.yaml", "GATEHOUSE_SECRETS_DIR": "\(folder)/secrets"], without: fromFile)
            #expect(!(try await DatabaseFailoverTests.signIn(client: http, gateway: mounted.url)).idToken.isEmpty)
            mounted.process.stop()

            // The file alone: its wrong secret is what GitHub (the emulator) gets, so the sign-in fails.
            let fileOnly = try await ServeProcess.start(
                name: "file", database: nil, emulatorURL: emulatorURL, key: key, folder: folder,
                extra: ["GATEHOUSE_CONFIG": "\(folder)/gatehouse.yaml"], without: fromFile)
            defer { fileOnly.process.stop() }
            await #expect(throws: (any Error).self) { _ = try await DatabaseFailoverTests.signIn(client: http, gateway: fileOnly.url) }
        }
    }

    @Test(
        "an unknown key stops serve with a suggestion; a malformed value names the key, the file and what is accepted, never a secret's value; a nested key is reported, not ignored"
    )
    func refusedFiles() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await withEmulatorAndFolder("gatehouse-config") { emulatorURL, _ in
            try Self.write("prot: 8080\n", to: "\(folder)/typo.yaml")
            do {
                let started = try await ServeProcess.start(
                    name: "typo", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                    extra: ["GATEHOUSE_CONFIG": "\(folder)/typo.yaml"])
                started.process.stop()
                Issue.record("serve started with an unknown key in its configuration file")
            } catch let error as FlowError {
                #expect(error.description.contains("unknown key prot; did you mean port?"), "\(error)")
            }
        }
        let cases: [(file: String, text: String, expected: String, hidden: String?)] = [
            (
                "port.yaml", "port: eighty\n", "GATEHOUSE_PORT (port in \(folder)/port.yaml) must be a port number from 0 to 65535, not \"eighty\"",
                nil
            ),
            ("flag.json", #"{"development": "yes"}"#, "GATEHOUSE_DEVELOPMENT (development in \(folder)/flag.json) must be true or false", nil),
            ("level.yaml", "log_level: loud\n", "must be one of trace, debug, info, notice, warning, error, critical", nil),
            ("key.yaml", "encryption_key: hunter2-not-base64\n", "GATEHOUSE_ENCRYPTION_KEY (encryption_key in", "hunter2"),
            ("nested.yaml", "github:\n  client_id: x\n", "unknown key github.client_id; did you mean github_client_id?", nil),
            ("env-only.yaml", "secrets_dir: /run/secrets\n", "unknown key secrets_dir", nil),
            ("list.yaml", "- port\n", "the top level must be a mapping", nil),
        ]
        for item in cases {
            try Self.write(item.text, to: "\(folder)/\(item.file)")
            let (status, output) = try await Self.run(["config", "show", "--config", "\(folder)/\(item.file)"])
            #expect(status != 0, "\(item.file)")
            #expect(output.contains(item.expected), "\(item.file): \(output)")
            if let hidden = item.hidden { #expect(!output.contains(hidden), "\(item.file) echoed a secret: \(output)") }
        }
        // The environment is validated the same way: a bad port no longer becomes 8080.
        let (status, output) = try await Self.run(["config", "show"], environment: ["GATEHOUSE_PORT": "99999"])
        #expect(status != 0 && output.contains("GATEHOUSE_PORT must be a port number from 0 to 65535, not \"99999\""), "\(output)")
        // Heap trims are whole seconds apart (or never): a fraction would trim without pause.
        let (trimStatus, trimOutput) = try await Self.run(["config", "show"], environment: ["GATEHOUSE_HEAP_TRIM_INTERVAL": "0.001"])
        #expect(trimStatus != 0 && trimOutput.contains("GATEHOUSE_HEAP_TRIM_INTERVAL must be a whole number 0–3153600000"), "\(trimOutput)")
        // A breaker open for longer than a day is a provider switched off, not a pause.
        let (openStatus, openOutput) = try await Self.run(["config", "show"], environment: ["GATEHOUSE_BREAKER_OPEN_SECONDS": "1e30"])
        #expect(openStatus != 0 && openOutput.contains("GATEHOUSE_BREAKER_OPEN_SECONDS must be a number of seconds 1–86400"), "\(openOutput)")
        // A receiver's URL that is no URL is not repeated in the error.
        let (urlStatus, urlOutput) = try await Self.run(["config", "show"], environment: ["GATEHOUSE_WEBHOOK_SLACK_URL": "hooks/url-token-value"])
        #expect(urlStatus != 0 && urlOutput.contains("GATEHOUSE_WEBHOOK_SLACK_URL must be an absolute http(s) URL"), "\(urlOutput)")
        #expect(!urlOutput.contains("url-token-value"), "\(urlOutput)")
        // Durations without a natural ceiling stop at a century: longer ones overflowed the
        // dates the retention jobs hand PostgreSQL and stopped the process.
        for name in ["GATEHOUSE_WEBHOOK_RETENTION", "GATEHOUSE_AUDIT_RETENTION", "GATEHOUSE_STALE_IF_ERROR", "GATEHOUSE_PROFILE_CACHE_TTL"] {
            let (status, output) = try await Self.run(["config", "show"], environment: [name: "1e13"])
            #expect(status != 0 && output.contains("\(name) must be a number of seconds ≥ "), "\(name): \(output)")
            #expect(output.contains("(up to 100 years)"), "\(name): \(output)")
        }
        // Intervals of whole seconds stop there too: longer ones stopped the process at start.
        for (name, minimum) in [("GATEHOUSE_PURGE_INTERVAL", 1), ("GATEHOUSE_HEAP_TRIM_INTERVAL", 0)] {
            let (status, output) = try await Self.run(["config", "show"], environment: [name: "9223372036854775807"])
            #expect(status != 0 && output.contains("\(name) must be a whole number \(minimum)–3153600000"), "\(name): \(output)")
        }
        // A port or a timeout given as an option is checked as the settings are: a port past
        // 65535 was taken modulo 65,536, a huge timeout stopped the process.
        for arguments in [["serve", "--port", "70000"], ["demo", "--port", "99999999999"], ["demo", "--emulator-port=-1"]] {
            let (status, output) = try await Self.run(arguments, environment: [:])
            #expect(status != 0 && output.contains("must be a port number from 0 to 65535"), "\(arguments): \(output)")
        }
        for timeout in ["1e300", "nan", "-1"] {
            let (status, output) = try await Self.run(["check", "--timeout=\(timeout)"], environment: [:])
            #expect(status != 0 && output.contains("--timeout must be a number of seconds from 0 to 3600"), "\(timeout): \(output)")
        }
        // Every refresh counts a session's spent tokens up to the limit: it has a ceiling.
        for limit in ["9223372036854775807", "1000001"] {
            let (status, output) = try await Self.run(["config", "show"], environment: ["GATEHOUSE_SESSION_REFRESH_LIMIT": limit])
            #expect(status != 0 && output.contains("GATEHOUSE_SESSION_REFRESH_LIMIT must be a whole number 1–1000000"), "\(limit): \(output)")
        }
    }

    @Test(
        "config show prints each value's source (environment, secrets folder, file, default), redacts secrets wherever they come from, reads JSON's own types, and points out an unknown GATEHOUSE_ variable"
    )
    func configShow() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: "\(folder)/secrets", withIntermediateDirectories: true)
        try Self.write("folder-secret-value\n", to: "\(folder)/secrets/GATEHOUSE_YAHOO_CLIENT_SECRET")
        try Self.write(
            #"{"port": 8443, "development": true, "profile_cache_ttl": 2.5, "allowed_origins": ["https://a.example", "https://b.example"], "github_client_secret": "file-secret-value", "oidc_corp_issuer": "https://corp.example"}"#,
            to: "\(folder)/gatehouse.json")
        let (status, output) = try await Self.run(
            ["config", "show", "--config", "\(folder)/gatehouse.json"],
            environment: [
                "GATEHOUSE_SECRETS_DIR": "\(folder)/secrets", "GATEHOUSE_LOG_LEVEL": "debug",
                "GATEHOUSE_MICROSOFT_CLIENT_SECRET": "env-secret-value", "GATEHOUSE_PROT": "1",
                // A receiver's URL may carry its token: only its origin is shown.
                "GATEHOUSE_WEBHOOK_SLACK_URL": "https://hooks.example.com/services/T0/B0/url-token-value",
                "GATEHOUSE_HOOK_BEFORE_SIGN_IN_URL": "http://[::1]:8099/hooks/before?key=url-token-value",
            ],
            removing: ["GATEHOUSE_PORT", "GATEHOUSE_DEVELOPMENT"])
        #expect(status == 0, "\(output)")
        func line(_ name: String) -> String { output.split(separator: "\n").first { $0.hasPrefix(name + " ") }.map(String.init) ?? "" }
        #expect(line("GATEHOUSE_PORT").contains("8443") && line("GATEHOUSE_PORT").hasSuffix("file \(folder)/gatehouse.json"), "\(output)")
        #expect(line("GATEHOUSE_DEVELOPMENT").contains("true"))
        #expect(line("GATEHOUSE_PROFILE_CACHE_TTL").contains("2.5"))
        #expect(line("GATEHOUSE_ALLOWED_ORIGINS").contains("https://a.example,https://b.example"))
        #expect(line("GATEHOUSE_OIDC_CORP_ISSUER").contains("https://corp.example"))
        #expect(line("GATEHOUSE_LOG_LEVEL").contains("debug") && line("GATEHOUSE_LOG_LEVEL").hasSuffix("environment"))
        #expect(
            line("GATEHOUSE_YAHOO_CLIENT_SECRET").contains("<redacted>")
                && line("GATEHOUSE_YAHOO_CLIENT_SECRET").hasSuffix("secrets folder \(folder)/secrets"))
        #expect(line("GATEHOUSE_GITHUB_CLIENT_SECRET").contains("<redacted>"))
        #expect(line("GATEHOUSE_MICROSOFT_CLIENT_SECRET").contains("<redacted>"))
        #expect(line("GATEHOUSE_SHUTDOWN_TIMEOUT").contains("20") && line("GATEHOUSE_SHUTDOWN_TIMEOUT").hasSuffix("default"))
        #expect(line("GATEHOUSE_WEBHOOK_SLACK_URL").contains("https://hooks.example.com/…"), "\(output)")
        #expect(line("GATEHOUSE_HOOK_BEFORE_SIGN_IN_URL").contains("http://[::1]:8099/…"), "\(output)")
        for secret in ["folder-secret-value", "file-secret-value", "env-secret-value", "url-token-value"] { #expect(!output.contains(secret)) }
        #expect(output.contains("ignored: GATEHOUSE_PROT is not a setting (did you mean GATEHOUSE_PORT?)"), "\(output)")
    }

    @Test(
        "a variable reported as no setting is ignored indeed: an OpenID provider named in lower case is not configured (its settings' checks would not apply)"
    )
    func ignoredVariablesConfigureNothing() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (_, output) = try await Self.run(
            ["check", "--offline"],
            environment: [
                "GATEHOUSE_PUBLIC_URL": "https://auth.example.com", "GATEHOUSE_DATA_DIR": "\(folder)/data",
                "GATEHOUSE_ENCRYPTION_KEY": Data(repeating: 7, count: 32).base64EncodedString(),
                "GATEHOUSE_GITHUB_CLIENT_ID": "gh-client", "GATEHOUSE_GITHUB_CLIENT_SECRET": "gh-secret",
                "GATEHOUSE_OIDC_corp_ISSUER": "https://login.example.net", "GATEHOUSE_OIDC_corp_CLIENT_ID": "corp-client",
                "GATEHOUSE_OIDC_corp_NONCE": "raw",
            ])
        #expect(output.contains("configuration: ok (providers github.com)"), "\(output)")
        #expect(!output.contains("oidc.corp"), "\(output)")
    }

    @Test("a CA bundle that cannot be read or holds no PEM certificate stops the start: every https call would fail while the gateway said ready")
    func unusableCABundleIsRefused() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Self.write("not a certificate\n", to: "\(folder)/notes.pem")
        let environment = [
            "GATEHOUSE_PUBLIC_URL": "https://auth.example.com", "GATEHOUSE_DATA_DIR": "\(folder)/data",
            "GATEHOUSE_ENCRYPTION_KEY": Data(repeating: 7, count: 32).base64EncodedString(),
            "GATEHOUSE_GITHUB_CLIENT_ID": "gh-client", "GATEHOUSE_GITHUB_CLIENT_SECRET": "gh-secret",
        ]
        for (bundle, problem) in [
            ("\(folder)/absent.pem", "cannot be read"), ("\(folder)/notes.pem", "holds no PEM certificate"), (folder, "holds no PEM"),
        ] {
            let (status, output) = try await Self.run(
                ["check", "--offline"], environment: environment.merging(["GATEHOUSE_CA_BUNDLE": bundle]) { $1 })
            #expect(status != 0 && output.contains("GATEHOUSE_CA_BUNDLE (\(bundle)) \(problem)"), "\(bundle): \(output)")
        }
        let (status, output) = try await Self.run(
            ["check", "--offline"], environment: environment.merging(["GATEHOUSE_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt"]) { $1 })
        #expect(output.contains("configuration: ok"), "\(status): \(output)")
    }

    /// An article of the documentation catalog (`Docs/Gatehouse.docc`).
    static func article(_ name: String) throws -> String {
        try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Docs/Gatehouse.docc/\(name).md"),
            encoding: .utf8)
    }

    @Test("the Configuration article's table is the one `gatehouse config reference` prints from the code")
    func readmeTable() async throws {
        let readme = try Self.article("Configuration")
        let begin = "<!-- settings table: generated by `scripts/gatehouse config reference` -->\n"
        let end = "<!-- end of settings table -->"
        let start = try #require(readme.range(of: begin), "the Configuration article marks its settings table")
        let stop = try #require(readme.range(of: end, range: start.upperBound..<readme.endIndex))
        let (status, reference) = try await Self.run(["config", "reference"])
        #expect(status == 0)
        #expect(
            String(readme[start.upperBound..<stop.lowerBound]) == reference,
            "Docs/Gatehouse.docc/Configuration.md's settings table differs from the code: replace it with the output of `scripts/gatehouse config reference`"
        )
    }

    @Test("the Operating article's metrics table is the one `gatehouse config metrics` prints from the catalog")
    func readmeMetricsTable() async throws {
        let readme = try Self.article("Operating")
        let begin = "<!-- metrics table: generated by `scripts/gatehouse config metrics` -->\n"
        let start = try #require(readme.range(of: begin), "the Operating article marks its metrics table")
        let stop = try #require(readme.range(of: "<!-- end of metrics table -->", range: start.upperBound..<readme.endIndex))
        let (status, reference) = try await Self.run(["config", "metrics"])
        #expect(status == 0)
        #expect(
            String(readme[start.upperBound..<stop.lowerBound]) == reference,
            "Docs/Gatehouse.docc/Operating.md's metrics table differs from the code: replace it with the output of `scripts/gatehouse config metrics`"
        )
    }

    /// Runs `gatehouse` (standard output and error together).
    private static func run(_ arguments: [String], environment: [String: String] = [:], removing: [String] = []) async throws -> (
        Int32, String
    ) {
        let child = try SpawnedProcess.start(
            KeysCommandTests.executable.path, arguments,
            environment: ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("GATEHOUSE_") || $0.key.hasPrefix("GATEHOUSE_TEST") }
                .merging(environment) { $1 }.filter { !removing.contains($0.key) },
            output: .pipe)
        // Every command here answers at once: one that serves instead (a regression that lets
        // a refused setting through) fails its test instead of holding the run.
        let watchdog = child.watchdog(after: .seconds(120))
        defer { watchdog.cancel() }
        let output = await child.output()
        return (SpawnedProcess.exitCode(await child.exited()) ?? -1, output)
    }
}
