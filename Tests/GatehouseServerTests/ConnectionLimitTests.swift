import Testing

@testable import GatehouseServer

/// What the public listener's default connection limit leaves under the descriptor limit.
@Suite struct ConnectionLimitTests {
    @Test(
        "systemd's LimitNOFILE=65536 on 2 processors with the operations listener and 20 database connections: 49,035 connections, 16,345 descriptors for provider calls"
    )
    func systemdUnit() {
        let limit = ConnectionLimit.fitting(
            descriptorLimit: 65_536, upstreamConnections: 256, databaseConnections: 20, operationsListener: true, processors: 2)
        // 65,536 − (64 + 4 × 2 + 64 + 20) = 65,380 for connections and calls; a quarter for calls.
        #expect(limit == 65_380 - 16_345)
        #expect(limit + 16_345 + 156 == 65_536)
    }

    @Test("libcurl's kept connections are reserved whole when they are more than a quarter; without the operations listener its 64 go to connections")
    func keptConnectionsReserved() {
        let limit = ConnectionLimit.fitting(
            descriptorLimit: 2_048, upstreamConnections: 1_000, databaseConnections: 0, operationsListener: false, processors: 4)
        #expect(limit == 2_048 - 80 - 1_000)
    }

    @Test("a descriptor limit too low for the reserve still leaves one connection; an unlimited one does not overflow")
    func extremes() {
        #expect(
            ConnectionLimit.fitting(descriptorLimit: 64, upstreamConnections: 256, databaseConnections: 0, operationsListener: true, processors: 2)
                == 1)
        let unlimited = ConnectionLimit.fitting(
            descriptorLimit: .max, upstreamConnections: 256, databaseConnections: 20, operationsListener: true, processors: 64)
        #expect(unlimited > Int.max / 2)
    }
}
