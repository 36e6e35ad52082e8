import CurlClient
import Foundation
import GatehouseTestSupport
import Logging
import ProviderEmulator

/// An emulator on a kernel-chosen loopback port, with a libcurl client to talk to it.
/// Runs `body`, then stops the server (gracefully: `withRunningService`).
func withEmulator(
    _ configuration: EmulatorConfiguration = .init(), _ body: (_ baseURL: String, _ client: CurlHTTPClient) async throws -> Void
) async throws {
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let logger = Logger(label: "emulator-test") { _ in SwiftLogNoOpLogHandler() }
    let application = ProviderEmulator(configuration: configuration).application(port: 0, logger: logger) { continuation.yield($0) }
    let client = CurlHTTPClient()
    defer { client.shutdown() }
    try await withRunningService(application, logger: logger) {
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw EmulatorTestError("the emulator did not start") }
        try await body("http://127.0.0.1:\(port)", client)
    }
}

/// A failed expectation about the emulator's setup.
struct EmulatorTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension OutboundResponse {
    /// The body as a JSON object.
    func jsonObject() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw EmulatorTestError("not a JSON object: \(bodyText)")
        }
        return object
    }

    /// The query items of the `Location` header.
    func locationQuery() throws -> [String: String] {
        guard let location = headers["location"], let items = URLComponents(string: location)?.queryItems else {
            throw EmulatorTestError("no usable Location (status \(status))")
        }
        return Dictionary(items.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
    }
}
