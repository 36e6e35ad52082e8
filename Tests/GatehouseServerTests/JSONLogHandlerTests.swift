import Foundation
import Logging
import Testing

@testable import GatehouseServer

/// The log handler writes its JSON by hand: every line must still parse, keep value types,
/// and escape whatever a message or a provider's text carries.
@Suite("JSON log lines")
struct JSONLogHandlerTests {
    @Test(
        "the timestamp is what Date.ISO8601FormatStyle with fractional seconds writes: UTC, milliseconds, across years, leap days and the ends of days and seconds"
    )
    func timestampsAgreeWithFoundation() {
        let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        var dates = [
            0, 0.999, 1, 59.9994, 86_399.999, 86_400, 951_782_400 - 0.001, 951_782_400, 951_868_800, 1_709_164_800.5, 1_764_115_200,
            4_102_444_799.999, 4_102_444_800, 253_402_300_799,
        ].map { Date(timeIntervalSince1970: $0) }
        // Millisecond values, the floating-point edge both must read alike: 20 000 of them spread
        // over 1970–2100 by a fixed multiplicative step, the same on every run (never a fresh
        // draw that could land on a case no run saw before).
        for index in 1...20_000 {
            let milliseconds = (UInt64(index) &* 2_654_435_761_123) % 4_102_444_800_000
            dates.append(Date(timeIntervalSince1970: Double(milliseconds) / 1000))
        }
        for date in dates {
            var written: [UInt8] = []
            JSONLogHandler.writeTimestamp(date, to: &written)
            #expect(String(decoding: written, as: UTF8.self) == style.format(date), "\(date.timeIntervalSince1970)")
        }
    }

    @Test("a line parses as JSON with sorted keys, typed numbers and booleans, nested values, and escaped text")
    func linesAreJSON() throws {
        let sink = LogSink(capture: true)
        let logger = Logger(label: "t") { JSONLogHandler(label: $0, sink: sink) }
        let awkward =
            "quote \" backslash \\ newline \n tab \t bell \u{07} nul \u{0} unit \u{1F} cr \r next \u{85} line \u{2028} paragraph \u{2029}"
            + " dash — euro € â slash / é 🦉"
        logger.notice(
            "message \(awkward)",
            metadata: [
                "text": "\(awkward)", "count": .stringConvertible(42), "ratio": .stringConvertible(0.25), "flag": .stringConvertible(true),
                "list": .array(["a", .stringConvertible(1)]), "nested": .dictionary(["b": "x", "a": .stringConvertible(false)]),
                "hb.request.id": "7",
            ])
        let line = try #require(sink.lines.first)
        #expect(!line.contains("\n"))
        // No Unicode line break either: a tool splitting lines on them keeps the line whole.
        #expect(line.split(whereSeparator: \.isNewline).count == 1, "\(line)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["text"] as? String == awkward)
        #expect(object["message"] as? String == "message \(awkward)")
        #expect(object["count"] as? Int == 42 && object["ratio"] as? Double == 0.25 && object["flag"] as? Bool == true)
        #expect((object["list"] as? [Any])?.count == 2)
        #expect((object["nested"] as? [String: Any])?["a"] as? Bool == false)
        #expect(object["hb.request.id"] == nil && object["level"] as? String == "notice" && object["logger"] as? String == "t")
        let keys = try #require(line.firstRange(of: "\"count\"")).lowerBound < (try #require(line.firstRange(of: "\"flag\""))).lowerBound
        #expect(keys, "keys are sorted")
        // The line's time, written into it as Foundation's ISO 8601 style reads it back.
        let time = try #require(object["ts"] as? String)
        let read = try Date(time, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        #expect(abs(read.timeIntervalSinceNow) < 60, "\(time)")
    }

    @Test("a line of 300 members is written whole and sorted")
    func longLinesAreSorted() throws {
        let sink = LogSink(capture: true)
        let logger = Logger(label: "t") { JSONLogHandler(label: $0, sink: sink) }
        var metadata = Logger.Metadata()
        for index in (0..<300).reversed() { metadata[String(format: "m%03d", index)] = .stringConvertible(index) }
        logger.info("m", metadata: metadata)
        let line = try #require(sink.lines.first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object.count == 304, "the 300 members, ts, level, logger and message: \(object.count)")
        let names = try NSRegularExpression(pattern: #""([a-z0-9.]+)":"#).matches(in: line, range: NSRange(line.startIndex..., in: line))
            .map { String(line[Range($0.range(at: 1), in: line)!]) }
        #expect(names == names.sorted(), "sorted")
        #expect(names.count == 304, "\(names.count) names")
        #expect(object["m299"] as? Int == 299 && object["m000"] as? Int == 0)
    }

    @Test("a time in the event's metadata under the line's own name replaces the line's")
    func metadataReplacesTheTime() throws {
        let sink = LogSink(capture: true)
        let logger = Logger(label: "t") { JSONLogHandler(label: $0, sink: sink) }
        logger.info("m", metadata: ["ts": "given"])
        let line = try #require(sink.lines.first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["ts"] as? String == "given")
        #expect(line.components(separatedBy: "\"ts\"").count == 2, "\(line)")
    }

    @Test(
        "the handler fits a Logger's inline existential buffer (metadata set on a logger's copy allocates no box); Hummingbird's request counter is never kept and reads as the request's id"
    )
    func handlerStaysInline() {
        // Three words: a larger handler is boxed, and every copy of a logger that sets
        // metadata (Hummingbird sets its counter on each request's) then allocates a new box.
        #expect(MemoryLayout<JSONLogHandler>.size <= 3 * MemoryLayout<Int>.size, "\(MemoryLayout<JSONLogHandler>.size) bytes")
        #expect(MemoryLayout<JSONLogHandler>.alignment <= MemoryLayout<Int>.alignment)
        var handler = JSONLogHandler(label: "t", sink: LogSink(capture: true))
        handler[metadataKey: "hb.request.id"] = "7"
        handler[metadataKey: "kept"] = "1"
        #expect(handler.metadata == ["kept": "1"])
        // Hummingbird's `context.id` force-unwraps the counter: it reads as the request's id.
        #expect(handler[metadataKey: "hb.request.id"] == "-")
        let scoped = RequestScope.$current.withValue(RequestScope(id: "req-1", offered: nil)) { handler[metadataKey: "hb.request.id"] }
        #expect(scoped == "req-1")
    }

    @Test("each name is written once, sorted: the event's metadata wins over the logger's, and the logger's over the line's own fields")
    func laterMetadataWins() throws {
        let sink = LogSink(capture: true)
        var logger = Logger(label: "t") { JSONLogHandler(label: $0, sink: sink) }
        logger[metadataKey: "route"] = "logger"
        logger[metadataKey: "level"] = "from-logger"
        logger[metadataKey: "zone"] = "kept"
        logger.info("m", metadata: ["route": "event", "alpha": .stringConvertible(1)])
        let line = try #require(sink.lines.first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["route"] as? String == "event")
        #expect(object["level"] as? String == "from-logger")
        #expect(object["zone"] as? String == "kept" && object["alpha"] as? Int == 1)
        // Every name once, in sorted order (JSONSerialization would quietly keep one of two).
        let names = try NSRegularExpression(pattern: #""([a-z.]+)":"#).matches(in: line, range: NSRange(line.startIndex..., in: line))
            .map { String(line[Range($0.range(at: 1), in: line)!]) }
        #expect(names == ["alpha", "level", "logger", "message", "route", "ts", "zone"])
    }
}
