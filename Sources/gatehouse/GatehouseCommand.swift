import ArgumentParser
import GatehouseCore

/// `gatehouse`: the sign-in and unified-profile gateway.
@main
struct GatehouseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse",
        abstract: "A self-hosted sign-in and unified-profile gateway.",
        version: Gatehouse.version,
        subcommands: [ServeCommand.self, DemoCommand.self, MigrateCommand.self, KeysCommand.self, CheckCommand.self, ConfigCommand.self])
}
