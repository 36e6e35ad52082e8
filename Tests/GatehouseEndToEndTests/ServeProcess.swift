import Foundation
import GatehouseCore
import GatehouseTestSupport
import Logging
import ProviderEmulator
import Testing

/// A `gatehouse serve` child process configured for the in-process emulator.
struct ServeProcess {
    /// The public URL every instance shares (behind a load balancer); never contacted.
    static let publicURL = "http://localhost:9"
    let name: String
    let process: SpawnedProcess
    let url: String
    let logPath: String
    /// The operations listener (`/metrics`, the detailed `/readyz`), on a port of its own.
    let operationsURL: String

    /// The end of its log, for failure messages.
    var logTail: String {
        ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").split(separator: "\n").suffix(6).joined(separator: "\n")
    }

    /// Starts `gatehouse serve` on port 0 and waits (at most 60 s) for the port it reports.
    /// `database` is a PostgreSQL URL, or `nil` for SQLite in `folder`; `extra` adds settings,
    /// `without` leaves some out; `launcher` runs it through another program (`prlimit …`).
    static func start(
        name: String, database: String?, emulatorURL: String, key: Data, folder: String, extra: [String: String] = [:],
        without: Set<String> = [], launcher: [String] = []
    ) async throws -> ServeProcess {
        let log = "\(folder)/\(name).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let client = TestDeployment.githubClient
        var environment = [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
            "GATEHOUSE_PORT": "0", "GATEHOUSE_PUBLIC_URL": publicURL, "GATEHOUSE_RETURN_TO_ALLOWLIST": TestDeployment.returnTo,
            "GATEHOUSE_DEVELOPMENT": "true", "GATEHOUSE_ENCRYPTION_KEY": key.base64EncodedString(),
            "GATEHOUSE_DATA_DIR": "\(folder)/\(name)-data",
            "GATEHOUSE_DATABASE_TIMEOUT": "1", "GATEHOUSE_DATABASE_POOL_SIZE": "4", "GATEHOUSE_SHUTDOWN_TIMEOUT": "5",
            "GATEHOUSE_SHUTDOWN_DELAY": "0", "GATEHOUSE_OPS_ADDRESS": "127.0.0.1:0",
            "GATEHOUSE_GITHUB_CLIENT_ID": client.id, "GATEHOUSE_GITHUB_CLIENT_SECRET": client.secret,
            "GATEHOUSE_GITHUB_AUTHORIZE_URL": "\(emulatorURL)/github/login/oauth/authorize",
            "GATEHOUSE_GITHUB_TOKEN_URL": "\(emulatorURL)/github/login/oauth/access_token", "GATEHOUSE_GITHUB_API_URL": "\(emulatorURL)/github-api",
            "GATEHOUSE_AUTH_RATE_LIMIT": "0", "GATEHOUSE_UPSTREAM_TIMEOUT": "25",
        ]
        if let database { environment["GATEHOUSE_DATABASE_URL"] = database }
        environment.merge(extra) { $1 }
        for name in without { environment[name] = nil }
        let command = launcher + [KeysCommandTests.executable.path, "serve"]
        let process = try SpawnedProcess.start(command[0], Array(command.dropFirst()), environment: environment, output: .file(log))
        var port: String?
        var operationsPort: String?
        for _ in 0..<1200 where (port == nil || operationsPort == nil) && process.isRunning {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            port = text.split(separator: "\n").first { $0.contains("Gatehouse listening") }.flatMap { line in
                line.firstMatch(of: #/"http\.port":"?(\d+)/#).map { String($0.1) }
            }
            operationsPort = text.split(separator: "\n").first { $0.contains("Gatehouse operations listening") }.flatMap { line in
                line.firstMatch(of: #/"ops\.port":"?(\d+)/#).map { String($0.1) }
            }
            if port == nil || operationsPort == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let instance = ServeProcess(
            name: name, process: process, url: "http://127.0.0.1:\(port ?? "0")", logPath: log,
            operationsURL: "http://127.0.0.1:\(operationsPort ?? "0")")
        guard port != nil, operationsPort != nil else {
            process.stop()
            throw FlowError("gatehouse serve (\(name)) did not start: \(instance.logTail)")
        }
        return instance
    }
}

/// Runs the provider emulator in this process on a port it binds, for `body`; stopped
/// gracefully afterwards (`withRunningService`).
func withRunningEmulator<T>(_ body: (String) async throws -> T) async throws -> T {
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let logger = Logger(label: "emulator") { _ in SwiftLogNoOpLogHandler() }
    let application = ProviderEmulator().application(port: 0, logger: logger) { continuation.yield($0) }
    return try await withRunningService(application, logger: logger) {
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw FlowError("the emulator did not start") }
        return try await body("http://127.0.0.1:\(port)")
    }
}

/// The built `gatehouse`, a provider emulator in this process and a scratch folder named after
/// `prefix`, for `body`: what every test of a `gatehouse serve` process needs.
func withEmulatorAndFolder<T>(_ prefix: String, _ body: (_ emulatorURL: String, _ folder: String) async throws -> T) async throws -> T {
    try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
    return try await withRunningEmulator { emulatorURL in try await withScratchFolder(prefix) { try await body(emulatorURL, $0) } }
}

/// A new scratch folder named after `prefix` for `body`, removed afterwards.
func withScratchFolder<T>(_ prefix: String, _ body: (String) async throws -> T) async throws -> T {
    let folder = try TestScratch.folder(prefix)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    return try await body(folder)
}
