import Synchronization

/// Request ids: which `X-Request-Id` a caller may send, and fresh ones. The HTTP layer serves
/// each request under one, answers it as `X-Request-Id` and writes it in the request's problem
/// documents and in every log line written while it is served (the core's, upstream calls
/// included), so that an operator can follow one request through the log.
public enum RequestID {
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

    /// A new id (16 characters): this process's random prefix (48 bits) and a counter
    /// (48 bits), base64url. Unique within the process and, by the prefix, across instances;
    /// ids need not be secret, and one random draw per process spares every request a syscall.
    public static func generate() -> String {
        let number = counter.add(1, ordering: .relaxed).newValue
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 6) { bytes in
            for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: number >> (8 * (5 - index))) }
            return prefix + Base64URL.encode(UnsafeBufferPointer(bytes))
        }
    }

    /// This process's prefix: 6 random bytes, base64url (8 characters).
    private static let prefix = SecureRandom.token(byteCount: 6)
    /// Ids handed out so far in this process.
    private static let counter = Atomic<UInt64>(0)
}
