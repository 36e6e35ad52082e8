import Foundation
import GatehouseCore
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

/// A swift-log handler writing one JSON object per line: time (UTC, milliseconds), level,
/// label, message, the request id of the request being served (`RequestID.current`, as
/// `request.id`) and metadata, numbers and booleans passed as such (`.stringConvertible`)
/// kept as JSON numbers and booleans. Code never passes tokens, codes or cookies as
/// metadata; this handler adds none.
public struct JSONLogHandler: LogHandler {
    /// Metadata attached to every line of this logger.
    public var metadata: Logger.Metadata = [:]
    /// The minimum level written.
    public var logLevel: Logger.Level = .info
    private let label: String
    private let sink: LogSink
    private static let timestamp = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    /// Hummingbird's own per-request counter on `context.logger`: left out, so that a line
    /// carries one request id, `request.id` (the one answered as `X-Request-Id`).
    private static let frameworkRequestID = "hb.request.id"

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
        var object: [String: Any] = [
            "ts": Self.timestamp.format(Date()), "level": event.level.rawValue, "logger": label, "message": event.message.description,
        ]
        if let id = RequestID.current { object["request.id"] = id }
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) where key != Self.frameworkRequestID {
            object[key] = Self.json(value)
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        sink.write(String(decoding: data, as: UTF8.self))
    }

    /// A metadata value as JSON: numbers and booleans keep their type, the rest is text.
    private static func json(_ value: Logger.MetadataValue) -> Any {
        switch value {
        case .string(let text): return text
        case .stringConvertible(let convertible):
            switch convertible {
            case let flag as Bool: return flag
            case let number as Int: return number
            case let number as Int64: return number
            case let number as UInt16: return Int(number)
            case let number as UInt: return number
            case let number as Double where number.isFinite: return number
            default: return convertible.description
            }
        case .dictionary(let members): return members.mapValues { json($0) }
        case .array(let values): return values.map { json($0) }
        }
    }
}
