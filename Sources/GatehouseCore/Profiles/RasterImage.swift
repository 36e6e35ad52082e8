/// The image types Gatehouse serves as photos: raster formats only, recognised by their
/// `Content-Type` **and** their leading bytes. SVG (script-capable), HTML with an image type,
/// or anything else a provider or a user-chosen picture URL sends is refused.
public enum RasterImage: String, Sendable, CaseIterable {
    case jpeg = "image/jpeg"
    case png = "image/png"
    case gif = "image/gif"
    case webp = "image/webp"

    /// How many leading bytes `matches` needs.
    static let signatureLength = 12

    /// The type a `Content-Type` names (parameters and case ignored), if it is one of these.
    init?(contentType: String) {
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard let mediaType, let type = Self(rawValue: mediaType == "image/jpg" ? "image/jpeg" : mediaType) else { return nil }
        self = type
    }

    /// Whether `prefix` (the first bytes of the body) starts like an image of this type.
    func matches(_ prefix: [UInt8]) -> Bool {
        func starts(_ signature: [UInt8], at offset: Int = 0) -> Bool {
            prefix.count >= offset + signature.count && Array(prefix[offset..<offset + signature.count]) == signature
        }
        switch self {
        case .jpeg: return starts([0xFF, 0xD8, 0xFF])
        case .png: return starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        case .gif: return starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8))
        case .webp: return starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8)
        }
    }
}
