/// A baseline JPEG of one flat grey level: real `image/jpeg` bytes that any decoder reads,
/// for the emulated Graph photos (which are JPEGs, providers.md §2.2).
///
/// A flat image makes the encoding tiny: with a quantization table of ones, every 8×8 block
/// has the same DC coefficient and no AC energy, so the scan is one DC value, then "no
/// change, end of block" for every further block (standard Huffman tables, ITU T.81 Annex K).
enum FlatJPEG {
    /// The JPEG of a `width`×`height` image of grey `level`.
    static func jpeg(width: Int, height: Int, level: UInt8) -> [UInt8] {
        var out: [UInt8] = [0xFF, 0xD8]
        // DQT: table 0, 8-bit, all ones.
        out += [0xFF, 0xDB, 0x00, 0x43, 0x00] + [UInt8](repeating: 1, count: 64)
        // SOF0: 8-bit precision, height, width, one component (id 1, no subsampling, table 0).
        out += [0xFF, 0xC0, 0x00, 0x0B, 0x08] + be16(height) + be16(width) + [0x01, 0x01, 0x11, 0x00]
        // DHT: the standard luminance DC (class 0) and AC (class 1) tables.
        out += segment(0xC4, [0x00] + dcCounts + dcSymbols)
        out += segment(0xC4, [0x10] + acCounts + acSymbols)
        // SOS: one component using tables 0/0, spectral 0…63, no approximation.
        out += [0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3F, 0x00]
        var bits = BitWriter()
        let blocks = ((width + 7) / 8) * ((height + 7) / 8)
        let dc = 8 * (Int(level) - 128)
        for index in 0..<blocks {
            let difference = index == 0 ? dc : 0
            let category = difference == 0 ? 0 : (Int.bitWidth - abs(difference).leadingZeroBitCount)
            let (code, length) = dcCodes[category]
            bits.write(code, length)
            if category > 0 {
                // Negative values are sent as the one's complement in `category` bits.
                let magnitude = difference > 0 ? difference : difference + (1 << category) - 1
                bits.write(magnitude, category)
            }
            bits.write(0b1010, 4)  // AC end of block (code for symbol 0x00).
        }
        out += bits.finish()
        out += [0xFF, 0xD9]
        return out
    }

    private static func be16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }

    private static func segment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
        [0xFF, marker] + be16(payload.count + 2) + payload
    }

    private static let dcCounts: [UInt8] = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    private static let dcSymbols: [UInt8] = Array(0...11)
    private static let acCounts: [UInt8] = [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7D]
    private static let acSymbols: [UInt8] = [
        0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07, 0x22, 0x71, 0x14, 0x32, 0x81, 0x91,
        0xA1, 0x08, 0x23, 0x42, 0xB1, 0xC1, 0x15, 0x52, 0xD1, 0xF0, 0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0A, 0x16, 0x17, 0x18, 0x19, 0x1A,
        0x25, 0x26, 0x27, 0x28, 0x29, 0x2A, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3A, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4A, 0x53,
        0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5A, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6A, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79,
        0x7A, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0xA2, 0xA3, 0xA4, 0xA5,
        0xA6, 0xA7, 0xA8, 0xA9, 0xAA, 0xB2, 0xB3, 0xB4, 0xB5, 0xB6, 0xB7, 0xB8, 0xB9, 0xBA, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8, 0xC9,
        0xCA, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8, 0xD9, 0xDA, 0xE1, 0xE2, 0xE3, 0xE4, 0xE5, 0xE6, 0xE7, 0xE8, 0xE9, 0xEA, 0xF1, 0xF2,
        0xF3, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8, 0xF9, 0xFA,
    ]

    /// The canonical codes of the DC table, by category (T.81 Table K.3).
    private static let dcCodes: [(Int, Int)] = [
        (0b00, 2), (0b010, 3), (0b011, 3), (0b100, 3), (0b101, 3), (0b110, 3), (0b1110, 4), (0b11110, 5), (0b111110, 6), (0b1111110, 7),
        (0b11111110, 8), (0b111111110, 9),
    ]

    /// Packs bits MSB first, stuffing a zero byte after every 0xFF (T.81 F.1.2.3).
    private struct BitWriter {
        var bytes: [UInt8] = []
        var accumulator = 0
        var count = 0

        mutating func write(_ value: Int, _ length: Int) {
            for shift in stride(from: length - 1, through: 0, by: -1) {
                accumulator = accumulator << 1 | (value >> shift & 1)
                count += 1
                if count == 8 { flush() }
            }
        }

        private mutating func flush() {
            let byte = UInt8(accumulator & 0xFF)
            bytes.append(byte)
            if byte == 0xFF { bytes.append(0x00) }
            accumulator = 0
            count = 0
        }

        /// Pads the last byte with ones.
        mutating func finish() -> [UInt8] {
            while count != 0 { write(1, 1) }
            return bytes
        }
    }
}
