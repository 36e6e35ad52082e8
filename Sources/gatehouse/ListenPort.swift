import ArgumentParser

/// The check of a listening port given as an option, as `GATEHOUSE_PORT` is checked.
enum ListenPort {
    /// Throws unless `port` is absent or 0–65535 (`0` picks a free port).
    static func check(_ port: Int?, option: String) throws {
        guard let port, !(0...65535).contains(port) else { return }
        throw ValidationError("\(option) must be a port number from 0 to 65535, not \(port)")
    }
}
