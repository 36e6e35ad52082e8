import Foundation
import GatehouseCore
import Testing

/// The stored audit trail, run against every backend: newest first, filtered by account and
/// event type, paged by id, dropped past the retention.
@Suite struct AuditStoreConformanceTests {
    @Test(arguments: StorageBackend.all)
    func listsNewestFirstFilteredAndPaged(_ backend: StorageBackend) async throws {
        let storage = try await backend.make()
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        try await storage.appendAudit([
            AuditRecord(at: start, event: "account.created", actor: "user:a", uid: "a", provider: "github.com"),
            AuditRecord(at: start.addingTimeInterval(1), event: "account.disabled", actor: "operator:o", uid: "a"),
            AuditRecord(at: start.addingTimeInterval(2), event: "service-key.created", actor: "command-line", keyId: "k1"),
        ])
        try await storage.appendAudit([AuditRecord(at: start.addingTimeInterval(3), event: "account.created", actor: "user:b", uid: "b")])
        let all = try await storage.auditRecords(uid: nil, event: nil, before: nil, limit: 10)
        #expect(all.map(\.event) == ["account.created", "account.disabled", "service-key.created", "account.created"].reversed())
        #expect(all.map(\.id) == all.map(\.id).sorted(by: >) && Set(all.map(\.id)).count == 4)
        #expect(all.last == AuditRecord(id: all.last!.id, at: start, event: "account.created", actor: "user:a", uid: "a", provider: "github.com"))
        #expect(all[1].keyId == "k1" && all[1].uid == nil)
        #expect(try await storage.auditRecords(uid: "a", event: nil, before: nil, limit: 10).map(\.event) == ["account.disabled", "account.created"])
        #expect(try await storage.auditRecords(uid: nil, event: "account.created", before: nil, limit: 10).map(\.uid) == ["b", "a"])
        #expect(try await storage.auditRecords(uid: "a", event: "account.disabled", before: nil, limit: 10).map(\.actor) == ["operator:o"])
        // Paging: the next page starts below the last id seen.
        let first = try await storage.auditRecords(uid: nil, event: nil, before: nil, limit: 2)
        let second = try await storage.auditRecords(uid: nil, event: nil, before: first.last?.id, limit: 2)
        #expect(first + second == all)
        #expect(try await storage.dropAudit(before: start.addingTimeInterval(2)) == 2)
        #expect(
            try await storage.auditRecords(uid: nil, event: nil, before: nil, limit: 10).map(\.event) == ["account.created", "service-key.created"])
    }
}
