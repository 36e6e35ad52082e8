import Foundation
import GatehouseCore
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
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test(
        "create-service prints the secret alone on the last line; list never shows it; revoke makes it fail (SQLite data folder and PostgreSQL URL)",
        arguments: ["SQLite", "PostgreSQL"])
    func lifecycle(store: String) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build the gatehouse product first (swift build)")
        let location: [String]
        let storage: any GatehouseStorage
        if store == "SQLite" {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-keys-\(UUID().uuidString)").path
            location = ["--data-dir", folder]
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            storage = try SQLiteStorage(path: folder + "/gatehouse.sqlite")
        } else {
            let url = try await PostgresTestServer.freshDatabase()
            location = ["--database-url", url]
            storage = try PostgresStorage(url: url, maximumConnections: 2, logger: PostgresTestServer.quietLogger)
        }
        let created = try Self.run(["keys", "create-service", "billing", "--scopes", "profile:read,photo:read"] + location)
        #expect(created.status == 0)
        let secret = try #require(created.output.split(separator: "\n").last.map(String.init))
        #expect(secret.hasPrefix("ghsk_") && !secret.contains(" "))

        let listed = try Self.run(["keys", "list"] + location)
        #expect(listed.output.contains("billing") && listed.output.contains("active"))
        #expect(!listed.output.contains(secret))
        let id = try #require(listed.output.split(separator: "\t").first.map(String.init))

        let service = ServiceKeyService(storage: storage)
        let key = try await service.authorize(authorization: "Bearer \(secret)", scope: "photo:read")
        #expect(key.id == id)

        #expect(try Self.run(["keys", "revoke", id] + location).status == 0)
        #expect(try Self.run(["keys", "revoke", id] + location).status != 0)
        await #expect(throws: GatehouseError.self) { try await service.authorize(authorization: "Bearer \(secret)", scope: "photo:read") }
        #expect(try Self.run(["keys", "create-service", "x", "--scopes", "profile:write"] + location).status != 0)
    }
}
