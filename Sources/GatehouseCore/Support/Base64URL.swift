import Foundation

/// base64url without padding (RFC 4648 §5), the encoding of PKCE values, state, session
/// tokens and request ids. Encoded straight into the string's storage: going through
/// Foundation (`Data`, `base64EncodedData`, an alphabet swap, a second copy) cost a request id
/// per request more than the rest of its middleware.
public enum Base64URL {
    /// The 64 characters of the URL-safe alphabet, by value.
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes bytes.
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let input = bytes.withContiguousStorageIfAvailable { encode(buffer: $0) }
        return input ?? Array(bytes).withUnsafeBufferPointer { encode(buffer: $0) }
    }

    private static func encode(buffer input: UnsafeBufferPointer<UInt8>) -> String {
        // 4 characters per 3 bytes, the last group cut to 2 or 3 without padding: ⌈4n / 3⌉.
        let length = (input.count * 4 + 2) / 3
        return alphabet.withUnsafeBufferPointer { alphabet in
            String(unsafeUninitializedCapacity: length) { out in
                var read = 0
                var written = 0
                while read + 3 <= input.count {
                    let group = UInt32(input[read]) << 16 | UInt32(input[read + 1]) << 8 | UInt32(input[read + 2])
                    out[written] = alphabet[Int(group >> 18 & 63)]
                    out[written + 1] = alphabet[Int(group >> 12 & 63)]
                    out[written + 2] = alphabet[Int(group >> 6 & 63)]
                    out[written + 3] = alphabet[Int(group & 63)]
                    read += 3
                    written += 4
                }
                if read < input.count {
                    let second = read + 1 < input.count ? UInt32(input[read + 1]) : 0
                    let group = UInt32(input[read]) << 16 | second << 8
                    out[written] = alphabet[Int(group >> 18 & 63)]
                    out[written + 1] = alphabet[Int(group >> 12 & 63)]
                    written += 2
                    if read + 1 < input.count {
                        out[written] = alphabet[Int(group >> 6 & 63)]
                        written += 1
                    }
                }
                return written
            }
        }
    }

    /// Decodes text, or `nil` when it is not base64url.
    public static func decode(_ text: String) -> Data? {
        var base64: [UInt8] = []
        base64.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "-"): base64.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): base64.append(UInt8(ascii: "/"))
            default: base64.append(byte)
            }
        }
        while base64.count % 4 != 0 { base64.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(base64))
    }
}
