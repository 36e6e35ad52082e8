/// Chunks of a body as an async sequence, for the streamed request bodies the tests send.
extension Array where Element: Sendable {
    /// The elements as an async sequence that ends after the last one.
    public var async: AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        for element in self { continuation.yield(element) }
        continuation.finish()
        return stream
    }
}
