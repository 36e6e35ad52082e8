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

    /// Writes one line; `line` is its bytes without the newline.
    func write(_ line: consuming [UInt8]) {
        guard toStandardError else {
            let kept = String(decoding: line, as: UTF8.self)
            captured.withLock { $0.append(kept) }
            return
        }
        // One write(2) of the whole line (lines from several threads never interleave),
        // without Foundation's FileHandle on every request's audit line. The line is the
        // caller's last use of it, so its newline goes into its own spare capacity.
        // Appended to the parameter itself: a `var` copy of it would share its storage while the
        // parameter lives, and the append would copy the whole line.
        line.append(UInt8(ascii: "\n"))
        line.withUnsafeBufferPointer { bytes in
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
/// label, message, the request id of the request being served (`RequestScope.current`, as
/// `request.id`; a caller's id that was not adopted as `request.offered_id`) and metadata, numbers and booleans passed as such (`.stringConvertible`)
/// kept as JSON numbers and booleans. Code never passes tokens, codes or cookies as
/// metadata; this handler adds none.
public struct JSONLogHandler: LogHandler {
    /// Metadata attached to every line of this logger.
    public var metadata: Logger.Metadata = [:]
    /// The label and the sink, behind one reference: the handler is then 17 bytes and fits a
    /// `Logger`'s inline existential buffer (three words), so setting metadata on a copy of a
    /// logger (Hummingbird does on every request's) does not allocate a box for the copy.
    private let destination: Destination
    /// The minimum level written (last: a byte after two words leaves the size at 17).
    public var logLevel: Logger.Level = .info
    /// Hummingbird's own per-request counter on `context.logger`: never kept, so that a line
    /// carries one request id, `request.id` (the one answered as `X-Request-Id`), and setting
    /// it on every request copies no metadata. Read back (Hummingbird's `context.id`
    /// force-unwraps it), it answers that request id.
    private static let frameworkRequestID = "hb.request.id"

    /// Where a handler's lines go, shared by its copies.
    private final class Destination: Sendable {
        let label: String
        let sink: LogSink
        init(label: String, sink: LogSink) {
            self.label = label
            self.sink = sink
        }
    }

    /// Creates a handler for `label` writing to `sink`.
    public init(label: String, sink: LogSink) {
        destination = Destination(label: label, sink: sink)
    }

    /// Reads or writes one metadata value. Hummingbird's `hb.request.id` is not kept, and
    /// reads as the id of the request being served (`-` outside one).
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get {
            guard key != Self.frameworkRequestID else { return .string(RequestScope.current?.id ?? "-") }
            return metadata[key]
        }
        set {
            guard key != Self.frameworkRequestID else { return }
            metadata[key] = newValue
        }
    }

    /// Writes one line. The event's attached error is left out: its description may quote
    /// what a provider or driver sent; callers log the error's type as metadata instead.
    public func log(event: LogEvent) {
        // The line's own fields, then the logger's metadata, then the event's: on a shared
        // name the later wins. Gathered in an array and sorted once, where a dictionary
        // merging them hashed every name (Performance.md, Design notes).
        var fields = LineFields(capacity: 6 + metadata.count + (event.metadata?.count ?? 0))
        fields.add("ts", time: Date())
        fields.add("level", .string(event.level.rawValue), rank: 0)
        fields.add("logger", .string(destination.label), rank: 0)
        fields.add("message", .string(event.message.description), rank: 0)
        if let scope = RequestScope.current {
            fields.add("request.id", .string(scope.id), rank: 0)
            if let offered = scope.offered { fields.add("request.offered_id", .string(offered), rank: 0) }
        }
        for (key, value) in metadata where key != Self.frameworkRequestID { fields.add(key, value, rank: 1) }
        for (key, value) in event.metadata ?? [:] where key != Self.frameworkRequestID { fields.add(key, value, rank: 2) }
        var line: [UInt8] = []
        line.reserveCapacity(512)
        fields.write(to: &line)
        destination.sink.write(consume line)
    }

    /// `2026-11-25T18:31:22.123Z`: UTC, milliseconds truncated, as `Date.ISO8601FormatStyle`
    /// with fractional seconds writes it, appended to `out` as its 24 bytes. Written by hand
    /// and straight into the line: the style's formatter was a third of each log line's cost,
    /// a `String` of it one allocation more per line, and the audit trail writes a line per
    /// passthrough call.
    static func writeTimestamp(_ date: Date, to out: inout [UInt8]) {
        // Whole seconds, then the fraction's milliseconds truncated, as Foundation does (a
        // reading just below a millisecond stays in the one before).
        let interval = date.timeIntervalSince1970
        let whole = interval.rounded(.down)
        let seconds = Int64(whole)
        let millisecond = min(999, Int64((interval - whole) * 1000))
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        func put(_ value: Int64, digits: Int) {
            var divisor: Int64 = 1
            for _ in 1..<digits { divisor *= 10 }
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        put(year, digits: 4)
        out.append(UInt8(ascii: "-"))
        put(month, digits: 2)
        out.append(UInt8(ascii: "-"))
        put(day, digits: 2)
        out.append(UInt8(ascii: "T"))
        put(secondOfDay / 3600, digits: 2)
        out.append(UInt8(ascii: ":"))
        put(secondOfDay / 60 % 60, digits: 2)
        out.append(UInt8(ascii: ":"))
        put(secondOfDay % 60, digits: 2)
        out.append(UInt8(ascii: "."))
        put(millisecond, digits: 3)
        out.append(UInt8(ascii: "Z"))
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
    /// is text. Written by hand into bytes: the audit trail logs a line per passthrough call,
    /// and `JSONSerialization` with sorted keys (a locale-aware comparison per key) cost more
    /// than the call it records.
    static func write(_ value: Logger.MetadataValue, to out: inout [UInt8]) {
        switch value {
        case .string(let text):
            writeString(text, to: &out)
        case .stringConvertible(let convertible):
            switch convertible {
            case let flag as Bool: out.append(contentsOf: (flag ? "true" : "false").utf8)
            case let number as Int: out.append(contentsOf: String(number).utf8)
            case let number as Int64: out.append(contentsOf: String(number).utf8)
            case let number as UInt16: out.append(contentsOf: String(number).utf8)
            case let number as UInt: out.append(contentsOf: String(number).utf8)
            case let number as Double where number.isFinite: out.append(contentsOf: number.description.utf8)
            default: writeString(convertible.description, to: &out)
            }
        case .dictionary(let members):
            var fields = LineFields(capacity: members.count)
            for (key, value) in members { fields.add(key, value, rank: 0) }
            fields.write(to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                write(element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    /// A JSON string (RFC 8259 §7): `"` and `\` escaped, control characters as `\n`, `\t`
    /// or `\u00XX`, and the Unicode line breaks U+0085, U+2028 and U+2029 as `\u0085`,
    /// `\u2028` and `\u2029` (valid JSON as they are, but tools that split lines on Unicode
    /// line breaks would cut the line there); everything else, `/` and non-ASCII included, as
    /// it is (UTF-8).
    static func writeString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            // Most values (ids, codes, routes) need no escaping: append them whole.
            // 0xC2 and 0xE2 lead the UTF-8 of U+0085 and of U+2028/U+2029.
            guard bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 == 0xC2 || $0 == 0xE2 })
            else {
                out.append(contentsOf: bytes)
                return
            }
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
                case UInt8(ascii: "\n"): out.append(contentsOf: #"\n"#.utf8)
                case UInt8(ascii: "\r"): out.append(contentsOf: #"\r"#.utf8)
                case UInt8(ascii: "\t"): out.append(contentsOf: #"\t"#.utf8)
                case ..<0x20:
                    // UTF-8 continuation and lead bytes are all 0x80 or above: a byte below
                    // 0x20 is always a control character of its own.
                    out.append(contentsOf: #"\u00"#.utf8)
                    out.append(UInt8(ascii: byte < 0x10 ? "0" : "1"))
                    let low = byte & 0x0F
                    out.append(low < 10 ? UInt8(ascii: "0") + low : UInt8(ascii: "a") + low - 10)
                case 0xC2 where index < bytes.count && bytes[index] == 0x85:
                    out.append(contentsOf: #"\u0085"#.utf8)
                    index += 1
                case 0xE2 where index + 1 < bytes.count && bytes[index] == 0x80 && (bytes[index + 1] == 0xA8 || bytes[index + 1] == 0xA9):
                    out.append(contentsOf: (bytes[index + 1] == 0xA8 ? #"\u2028"# : #"\u2029"#).utf8)
                    index += 2
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// The members of one JSON object of a log line, each name once, written in sorted order.
struct LineFields {
    private struct Field {
        var name: String
        /// The rank above the order added: of the fields sharing a name, the greatest wins.
        var precedence: Int
        var value: Value
    }

    /// A member's value: a logger's, or a time written as the line is (no string of its own).
    private enum Value {
        case metadata(Logger.MetadataValue)
        case time(Date)
    }

    private var fields: [Field] = []

    /// Room for `capacity` members at once.
    init(capacity: Int) {
        fields.reserveCapacity(capacity)
    }

    /// Adds a member; of members sharing a name, the one of the highest rank (the last added
    /// of that rank) is written.
    mutating func add(_ name: String, _ value: Logger.MetadataValue, rank: Int) {
        fields.append(Field(name: name, precedence: rank << 32 | fields.count, value: .metadata(value)))
    }

    /// Adds a time member of rank 0, written as `JSONLogHandler.writeTimestamp` writes it.
    mutating func add(_ name: String, time: Date) {
        fields.append(Field(name: name, precedence: fields.count, value: .time(time)))
    }

    /// The object, names in `String`'s order (for the ASCII names of log lines, their bytes').
    consuming func write(to out: inout [UInt8]) {
        let fields = self.fields
        // Positions sorted by name, then precedence, so that the member written for a name is
        // the last of its run. The fields stay in place: sorting them moved a field, its
        // strings and its value, at every step. The positions are in a buffer on the stack
        // (on the heap only for a line far longer than the gateway's), not in an array
        // allocated for every line.
        withUnsafeTemporaryAllocation(of: Int.self, capacity: fields.count) { buffer in
            var order = buffer
            for index in fields.indices { order.initializeElement(at: index, to: index) }
            order.sort { left, right in
                fields[left].name == fields[right].name
                    ? fields[left].precedence < fields[right].precedence : fields[left].name < fields[right].name
            }
            out.append(UInt8(ascii: "{"))
            var first = true
            for position in order.indices {
                let index = order[position]
                if position + 1 < order.count, fields[order[position + 1]].name == fields[index].name { continue }
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                JSONLogHandler.writeString(fields[index].name, to: &out)
                out.append(UInt8(ascii: ":"))
                switch fields[index].value {
                case .metadata(let value):
                    JSONLogHandler.write(value, to: &out)
                case .time(let time):
                    out.append(UInt8(ascii: "\""))
                    JSONLogHandler.writeTimestamp(time, to: &out)
                    out.append(UInt8(ascii: "\""))
                }
            }
            out.append(UInt8(ascii: "}"))
        }
    }
}
