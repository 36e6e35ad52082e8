/// Hex text of bytes, written digit by digit: `String(format: "%02x")` per byte builds a
/// formatter and a locale each time, which made it most of the cost of issuing a code.
enum Hex {
    private static let lower = Array("0123456789abcdef".utf8)
    private static let upper = Array("0123456789ABCDEF".utf8)

    /// Lower-case hex of `bytes` (`uppercase`: upper-case).
    static func string<Bytes: Sequence>(_ bytes: Bytes, uppercase: Bool = false) -> String where Bytes.Element == UInt8 {
        let digits = uppercase ? upper : lower
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
