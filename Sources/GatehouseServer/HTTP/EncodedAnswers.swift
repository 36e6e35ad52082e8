import GatehouseCore
import Hummingbird

/// The JSON of recent answers, reused while the value is the same. Encoding a unified
/// profile with Foundation's `JSONEncoder` (sorted keys, ISO 8601 dates) was a fifth of a
/// `/v1/me` request answered from memory (perf, release build). Entries are found by a key
/// (the uid) and used only when their value equals the one to answer, so a changed profile
/// can never be answered with an old body; at most `capacity` are held.
final class EncodedAnswers<Value: Encodable & Equatable & Sendable>: Sendable {
    private struct Encoded: Sendable {
        var value: Value
        var body: ByteBuffer
    }

    private let recent: RecentValues<String, Encoded>

    /// Holds the bodies of at most `capacity` keys.
    init(capacity: Int) {
        recent = RecentValues(capacity: capacity)
    }

    /// `value` as JSON (as `JSONCoding` encodes it), the body of `key`'s last answer when
    /// that was an equal value.
    func json(_ value: Value, key: String) throws -> ByteBuffer {
        if let encoded = recent.value(for: key), encoded.value == value { return encoded.body }
        let body = ByteBuffer(data: try JSONCoding.encoder().encode(value))
        recent.insert(Encoded(value: value, body: body), for: key)
        return body
    }

    /// `value` as a JSON response (see `Response.json`), its body reused as `json` does.
    func response(_ value: Value, key: String) throws -> Response {
        Response.json(body: try json(value, key: key))
    }
}
