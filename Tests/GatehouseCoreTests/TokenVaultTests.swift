import Foundation
import Testing

@testable import GatehouseCore

/// AES-256-GCM sealing of provider tokens, bound to the link it belongs to.
@Suite struct TokenVaultTests {
    // A vault without a store: configured keys alone (`v1`), as tools and legacy values use.
    let key = TokenVault.generateKey()

    @Test func sealsAndOpens() async throws {
        let vault = try TokenVault(keys: [key])
        let sealed = try await vault.seal(Data("gho_secret".utf8), context: "github.com|1")
        #expect(sealed.hasPrefix("v1.\(vault.currentKeyID)."))
        #expect(!sealed.contains("gho_secret"))
        #expect(try await vault.open(sealed, context: "github.com|1") == Data("gho_secret".utf8))
    }

    @Test func sealingTwiceGivesDifferentCiphertexts() async throws {
        let vault = try TokenVault(keys: [key])
        let plaintext = Data("same".utf8)
        #expect(try await vault.seal(plaintext, context: "c") != vault.seal(plaintext, context: "c"))
    }

    @Test func anotherContextDoesNotOpen() async throws {
        let vault = try TokenVault(keys: [key])
        let sealed = try await vault.seal(Data("t".utf8), context: "github.com|1")
        await #expect(throws: TokenVault.VaultError.self) { try await vault.open(sealed, context: "github.com|2") }
    }

    @Test func alteredValueDoesNotOpen() async throws {
        let vault = try TokenVault(keys: [key])
        let sealed = try await vault.seal(Data("token".utf8), context: "c")
        var bytes = try #require(Base64URL.decode(String(sealed.split(separator: ".")[2])))
        bytes[bytes.count / 2] ^= 0x01
        let altered = "v1.\(vault.currentKeyID).\(Base64URL.encode(bytes))"
        await #expect(throws: TokenVault.VaultError.self) { try await vault.open(altered, context: "c") }
        await #expect(throws: TokenVault.VaultError.self) { try await vault.open("v2.\(vault.currentKeyID).AAAA", context: "c") }
        await #expect(throws: TokenVault.VaultError.self) { try await vault.open("garbage", context: "c") }
    }

    @Test func oldKeysStillOpenAfterRotation() async throws {
        let old = try TokenVault(keys: [key])
        let sealed = try await old.seal(Data("kept".utf8), context: "c")
        let newKey = TokenVault.generateKey()
        let rotated = try TokenVault(keys: [newKey, key])
        #expect(rotated.currentKeyID != old.currentKeyID)
        #expect(try await rotated.open(sealed, context: "c") == Data("kept".utf8))
        #expect(try await rotated.seal(Data("x".utf8), context: "c").hasPrefix("v1.\(rotated.currentKeyID)."))
        let withoutOld = try TokenVault(keys: [newKey])
        await #expect(throws: TokenVault.VaultError.self) { try await withoutOld.open(sealed, context: "c") }
    }

    @Test func refusesBadKeys() {
        #expect(throws: GatehouseError.self) { try TokenVault(keys: []) }
        #expect(throws: GatehouseError.self) { try TokenVault(keys: [Data(count: 16)]) }
    }
}
