import Foundation
import GatehouseCore
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

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
            // One write(2) of the whole line (lines from several threads never interleave),
            // without Foundation's FileHandle on every request's audit line.
            var text = line + "\n"
            text.withUTF8 { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = Glibc.write(2, bytes.baseAddress! + offset, bytes.count - offset)
                    if written > 0 {
                        offset += written
                    } else if written < 0, errno == EINTR {
                        continue
                    } else {
                        return  // standard error is gone: nothing else can be done with the line
                    }
                }
            }
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
        var members: [String: Logger.MetadataValue] = [
            "ts": .string(Self.timestamp.format(Date())), "level": .string(event.level.rawValue), "logger": .string(label),
            "message": .string(event.message.description),
        ]
        if let id = RequestID.current { members["request.id"] = .string(id) }
        for (key, value) in metadata where key != Self.frameworkRequestID { members[key] = value }
        for (key, value) in event.metadata ?? [:] where key != Self.frameworkRequestID { members[key] = value }
        var line = ""
        line.reserveCapacity(256)
        Self.write(.dictionary(members), to: &line)
        sink.write(line)
    }

    /// A metadata value as JSON, keys sorted: numbers and booleans keep their type, the rest
    /// is text. Written by hand: the audit trail logs a line per passthrough call, and
    /// `JSONSerialization` with sorted keys (a locale-aware comparison per key) cost more than
    /// the call it records.
    static func write(_ value: Logger.MetadataValue, to out: inout String) {
        switch value {
        case .string(let text):
            writeString(text, to: &out)
        case .stringConvertible(let convertible):
            switch convertible {
            case let flag as Bool: out += flag ? "true" : "false"
            case let number as Int: out += String(number)
            case let number as Int64: out += String(number)
            case let number as UInt16: out += String(number)
            case let number as UInt: out += String(number)
            case let number as Double where number.isFinite: out += number.description
            default: writeString(convertible.description, to: &out)
            }
        case .dictionary(let members):
            out += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                writeString(key, to: &out)
                out += ":"
                write(members[key]!, to: &out)
            }
            out += "}"
        case .array(let values):
            out += "["
            for (index, element) in values.enumerated() {
                if index > 0 { out += "," }
                write(element, to: &out)
            }
            out += "]"
        }
    }

    /// A JSON string (RFC 8259 §7): `"` and `\` escaped, control characters as `\n`, `\t`
    /// or `\u00XX`; everything else, `/` and non-ASCII included, as it is.
    static func writeString(_ text: String, to out: inout String) {
        out += "\""
        // Most values (ids, codes, routes) need no escaping: append them whole.
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out += text
            out += "\""
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
