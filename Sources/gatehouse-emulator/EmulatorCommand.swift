import ArgumentParser
import Foundation
import Logging
import ProviderEmulator

/// `gatehouse-emulator`: runs the provider emulator on its own.
@main
struct EmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse-emulator",
        abstract:
            "Emulates GitHub, Microsoft (identity platform and Graph), Yahoo and a standard OpenID provider on loopback for Gatehouse tests and demos."
    )

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0 picks a free one).")
    var port = 8081

    func run() async throws {
        let logger = Logger(label: "gatehouse-emulator")
        let app = ProviderEmulator().application(host: host, port: port, logger: logger) { port in
            // Unbuffered: a script reading the port from a pipe must get the line at once.
            FileHandle.standardOutput.write(Data("Gatehouse emulator ready at http://\(host):\(port)\n".utf8))
        }
        try await app.runService()
    }
}
