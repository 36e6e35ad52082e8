import Crypto
import Foundation

/// Unguessable values: state, nonce, PKCE verifiers, session and result ids.
public enum SecureRandom {
    /// `byteCount` random bytes from the system CSPRNG, base64url-encoded.
    /// 32 bytes (256 bits) is the default: comfortably above the 128 bits design §4 asks for.
    public static func token(byteCount: Int = 32) -> String {
        return Base64URL.encode(bytes(byteCount))
    }

    /// `count` random bytes from the system's CSPRNG, drawn eight at a time (a draw is a
    /// `getrandom` call on Linux; one per byte made a 32-byte token 32 system calls).
    public static func bytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 7)
        while bytes.count < count {
            var word = generator.next()
            for _ in 0..<8 {
                bytes.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return Array(bytes.prefix(count))
    }

    /// Lower-case hex SHA-256 of the text: how ids and secrets are stored, so a copy of the
    /// database does not hand out live sessions. (Hex on the bytes: `String(format:)` per
    /// byte was a quarter of a cookie-authenticated `/v1/me`.)
    /// Hashed from the string's own bytes and written straight into the result (no `Data`, no
    /// byte array: this runs on every cookie-authenticated request).
    public static func digest(_ text: String) -> String {
        var text = text
        let digest = text.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
        return digest.withUnsafeBytes { hex($0) }
    }

    /// `bytes` as lower-case hex, written straight into the string.
    static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        hexDigits.withUnsafeBufferPointer { digits in
            String(unsafeUninitializedCapacity: 2 * bytes.count) { out in
                for (index, byte) in bytes.enumerated() {
                    out[2 * index] = digits[Int(byte >> 4)]
                    out[2 * index + 1] = digits[Int(byte & 0x0f)]
                }
                return 2 * bytes.count
            }
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}
