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

    func write(_ line: consuming String) {
        guard toStandardError else {
            let kept = line
            captured.withLock { $0.append(kept) }
            return
        }
        // One write(2) of the whole line (lines from several threads never interleave),
        // without Foundation's FileHandle on every request's audit line. The line is the
        // caller's last use of it, so its newline goes into its own spare capacity.
        var text = line
        text.append("\n")
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
    }
}

/// A swift-log handler writing one JSON object per line: time (UTC, milliseconds), level,
/// label, message, the request id of the request being served (`RequestID.current`, as
/// `request.id`; a caller's id that was not adopted as `request.offered_id`) and metadata, numbers and booleans passed as such (`.stringConvertible`)
/// kept as JSON numbers and booleans. Code never passes tokens, codes or cookies as
/// metadata; this handler adds none.
public struct JSONLogHandler: LogHandler {
    /// Metadata attached to every line of this logger.
    public var metadata: Logger.Metadata = [:]
    /// The minimum level written.
    public var logLevel: Logger.Level = .info
    private let label: String
    private let sink: LogSink
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
        // Sized for every member at once: growing the table as members arrive rehashed it
        // twice per audit line.
        var members = [String: Logger.MetadataValue](minimumCapacity: 6 + metadata.count + (event.metadata?.count ?? 0))
        members["ts"] = .string(Self.timestamp(Date()))
        members["level"] = .string(event.level.rawValue)
        members["logger"] = .string(label)
        members["message"] = .string(event.message.description)
        if let id = RequestID.current { members["request.id"] = .string(id) }
        if let offered = RequestID.offered { members["request.offered_id"] = .string(offered) }
        for (key, value) in metadata where key != Self.frameworkRequestID { members[key] = value }
        for (key, value) in event.metadata ?? [:] where key != Self.frameworkRequestID { members[key] = value }
        var line = ""
        line.reserveCapacity(256)
        Self.write(.dictionary(members), to: &line)
        sink.write(line)
    }

    /// `2026-11-25T18:31:22.123Z`: UTC, milliseconds truncated, as `Date.ISO8601FormatStyle`
    /// with fractional seconds writes it. Written by hand: the style's formatter was a third of
    /// each log line's cost, and the audit trail writes a line per passthrough call.
    static func timestamp(_ date: Date) -> String {
        // Whole seconds, then the fraction's milliseconds truncated, as Foundation does (a
        // reading just below a millisecond stays in the one before).
        let interval = date.timeIntervalSince1970
        let whole = interval.rounded(.down)
        let seconds = Int64(whole)
        let millisecond = min(999, Int64((interval - whole) * 1000))
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        return String(unsafeUninitializedCapacity: 24) { out in
            var index = 0
            func put(_ value: Int64, digits: Int) {
                var value = value
                for position in stride(from: index + digits - 1, through: index, by: -1) {
                    out[position] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                index += digits
            }
            func put(_ character: Unicode.Scalar) {
                out[index] = UInt8(ascii: character)
                index += 1
            }
            put(year, digits: 4)
            put("-")
            put(month, digits: 2)
            put("-")
            put(day, digits: 2)
            put("T")
            put(secondOfDay / 3600, digits: 2)
            put(":")
            put(secondOfDay / 60 % 60, digits: 2)
            put(":")
            put(secondOfDay % 60, digits: 2)
            put(".")
            put(millisecond, digits: 3)
            put("Z")
            return index
        }
    }

    /// Quotient rounded down and the remainder that goes with it (never negative).
    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value >= 0 ? value / divisor : (value - divisor + 1) / divisor
        return (quotient, value - quotient * divisor)
    }

    /// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`).
    private static func civilDate(daysSinceEpoch days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
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
            for (index, member) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out += "," }
                writeString(member.key, to: &out)
                out += ":"
                write(member.value, to: &out)
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
