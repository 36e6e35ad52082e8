/// The request body's producer failed (the caller's body ended early, or broke a cap): the
/// transfer was aborted because of the body, not because of the server, so nothing about the
/// server should be concluded from it. `underlying` is the producer's own error.
public struct OutboundBodyError: Error, Sendable, CustomStringConvertible {
    /// What the body's source threw.
    public let underlying: any Error

    /// Wraps a producer's error.
    public init(underlying: any Error) {
        self.underlying = underlying
    }

    /// `request body: …`.
    public var description: String { "request body: \(underlying)" }
}
