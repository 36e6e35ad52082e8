import Foundation

/// A real `gatehouse demo` child process on ports the kernel picked (gateway and emulator),
/// with a data folder of its own.
public struct DemoProcess: Sendable {
    /// The process.
    public let process: SpawnedProcess
    /// The gateway's URL, as the demo printed it once it served.
    public let url: String
    /// The data folder (SQLite file, the demo's encryption key).
    public let folder: String

    /// Starts the demo (`environment` replaces the test's own when given) and waits (bounded) until it prints its URL; stops it and throws when it
    /// does not come up.
    public static func start(executable: String, environment: [String: String]? = nil) async throws -> DemoProcess {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-demo-\(UUID().uuidString)").path
        let output = folder + ".out"
        guard FileManager.default.createFile(atPath: output, contents: nil) else { throw DemoFailure("cannot create \(output)") }
        let process = try SpawnedProcess.start(
            executable, ["demo", "--port", "0", "--emulator-port", "0", "--data-dir", folder], environment: environment, output: .file(output))
        for _ in 0..<600 where process.isRunning {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Gatehouse ready at ") }) {
                return DemoProcess(process: process, url: String(line.dropFirst(19)), folder: folder)
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        process.stop()
        throw DemoFailure("the demo did not start: \((try? String(contentsOfFile: output, encoding: .utf8)) ?? "")")
    }

    /// Runs `body` with a started demo and stops it afterwards, also when `body` throws.
    public static func with<T>(
        executable: String, environment: [String: String]? = nil, _ body: (DemoProcess) async throws -> T
    ) async throws -> T {
        let demo = try await start(executable: executable, environment: environment)
        defer {
            demo.process.stop()
            try? FileManager.default.removeItem(atPath: demo.folder)
            try? FileManager.default.removeItem(atPath: demo.folder + ".out")
        }
        return try await body(demo)
    }
}

/// Why a demo did not start.
public struct DemoFailure: Error, CustomStringConvertible {
    /// What happened.
    public let description: String
    /// A failure saying `description`.
    public init(_ description: String) { self.description = description }
}
