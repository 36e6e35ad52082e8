import Crypto
import Foundation

/// Generates real PNG images for emulated avatars: a coloured square with a lighter
/// diagonal band, so sizes and users look different in a browser.
///
/// The image data is stored (deflate "stored" blocks), which every PNG decoder accepts;
/// the emulator needs valid bytes, not small ones.
enum AvatarImage {
    /// A strong entity tag for image bytes, as an image host would send it.
    static func entityTag(_ bytes: [UInt8]) -> String {
        "\"" + Hex.string(SHA256.hash(data: bytes).prefix(12)) + "\""
    }

    /// A `size`×`size` RGB PNG.
    static func png(size: Int, color: (UInt8, UInt8, UInt8)) -> [UInt8] {
        var raw: [UInt8] = []
        raw.reserveCapacity(size * (size * 3 + 1))
        for y in 0..<size {
            raw.append(0)  // filter type "none"
            for x in 0..<size {
                let band = abs(x - y) < max(1, size / 8)
                raw.append(band ? color.0 / 2 + 128 : color.0)
                raw.append(band ? color.1 / 2 + 128 : color.1)
                raw.append(band ? color.2 / 2 + 128 : color.2)
            }
        }
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var header: [UInt8] = []
        header += bigEndian(UInt32(size)) + bigEndian(UInt32(size))
        header += [8, 2, 0, 0, 0]  // 8-bit, RGB, deflate, no filter, no interlace
        png += chunk("IHDR", header)
        png += chunk("IDAT", zlibStored(raw))
        png += chunk("IEND", [])
        return png
    }

    private static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typeBytes = Array(type.utf8)
        return bigEndian(UInt32(data.count)) + typeBytes + data + bigEndian(crc32(typeBytes + data))
    }

    private static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let length = min(65_535, data.count - offset)
            let final: UInt8 = offset + length >= data.count ? 1 : 0
            out.append(final)
            out += [UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF)]
            out += data[offset..<offset + length]
            offset += length
        } while offset < data.count
        return out + bigEndian(adler32(data))
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    private static let crcTable: [UInt32] = (0..<256).map { index in
        var c = UInt32(index)
        for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = crcTable[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }

    private static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return (b << 16) | a
    }
}
