import ArgumentParser
import Foundation
import GatehouseCore

/// `gatehouse`: the sign-in and unified-profile gateway.
@main
struct GatehouseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse",
        abstract: "A self-hosted sign-in and unified-profile gateway.",
        version: Gatehouse.version,
        subcommands: [ServeCommand.self, DemoCommand.self, MigrateCommand.self, KeysCommand.self, CheckCommand.self, ConfigCommand.self])

    /// The exit code of a configuration error, from every command (sysexits' `EX_USAGE`, as for
    /// a wrong option).
    static let configurationExitCode: Int32 = 64

    /// Parses and runs the command. A configuration error found while running (a malformed or
    /// missing setting, a value the gateway's validation refuses) prints the same one line from
    /// every command — `Error: <what, naming the setting>` — and exits 64, without the usage
    /// text ArgumentParser adds for a command line it could not parse.
    static func main() async {
        var command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            exit(withError: error)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as ValidationError {
            configurationFailure(error.message)
        } catch let error as GatehouseError where error.code == .invalidArgument {
            configurationFailure(error.detail)
        } catch {
            exit(withError: error)
        }
    }

    /// Prints `Error: message` on standard error and exits with `configurationExitCode`.
    static func configurationFailure(_ message: String) -> Never {
        FileHandle.standardError.write(Data("Error: \(message)\n".utf8))
        Foundation.exit(configurationExitCode)
    }
}
