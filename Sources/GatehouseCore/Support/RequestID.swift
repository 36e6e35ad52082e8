/// The id of the request being served: answered as `X-Request-Id`, put in its problem
/// documents and in every log line written while it is served (the core's, upstream calls
/// included), so that an operator can follow one request through the log.
public enum RequestID {
    /// The id of the request this task serves (set by the HTTP layer for the request's
    /// handling; inherited by the tasks it starts).
    @TaskLocal public static var current: String?

    /// The longest id accepted from a caller.
    public static let maxLength = 64

    /// A caller's `X-Request-Id` when it is sane (1–64 of `A–Z a–z 0–9 . _ -`: nothing that
    /// could forge a log field or a header), else `nil`.
    public static func accepted(_ value: String?) -> String? {
        guard let value, (1...maxLength).contains(value.utf8.count),
            value.utf8.allSatisfy({ byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    true
                default: false
                }
            })
        else { return nil }
        return value
    }

    /// A new id: 96 random bits, base64url (16 characters).
    public static func generate() -> String {
        SecureRandom.token(byteCount: 12)
    }
}
