/// Durations as the whole milliseconds that SQL settings and log fields take.
extension Duration {
    /// The duration in whole milliseconds, rounded down.
    public var wholeMilliseconds: Int {
        Int(components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000)
    }
}
