import Foundation
import Logging
import Synchronization

/// Where structured log lines go: standard error, or memory (tests search it for secrets).
public final class LogSink: Sendable {
    private let captured = Mutex<[String]>([])
    private let toStandardError: Bool

    /// A sink writing to standard error (`capture: false`) or keeping lines in memory.
    public init(capture: Bool) {
        self.toStandardError = !capture
    }

    /// Every line captured so far.
    public var lines: [String] { captured.withLock { $0 } }

    func write(_ line: String) {
        if toStandardError {
            FileHandle.standardError.write(Data((line + "\n").utf8))
        } else {
            captured.withLock { $0.append(line) }
        }
    }
}

/// A swift-log handler writing one JSON object per line: time, level, label, message and
/// metadata. Code never passes tokens, codes or cookies as metadata; this handler adds none.
public struct JSONLogHandler: LogHandler {
    /// Metadata attached to every line of this logger.
    public var metadata: Logger.Metadata = [:]
    /// The minimum level written.
    public var logLevel: Logger.Level = .info
    private let label: String
    private let sink: LogSink

    /// Creates a handler for `label` writing to `sink`.
    public init(label: String, sink: LogSink) {
        self.label = label
        self.sink = sink
    }

    /// Reads or writes one metadata value.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes one line. The event's attached error is left out: its description may quote
    /// what a provider or driver sent; callers log the error's type as metadata instead.
    public func log(event: LogEvent) {
        var object: [String: String] = [
            "ts": ISO8601DateFormatter().string(from: Date()), "level": event.level.rawValue, "logger": label,
            "message": event.message.description,
        ]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
            object[key] = value.description
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        sink.write(String(decoding: data, as: UTF8.self))
    }
}
