// swift-tools-version:6.2
import PackageDescription

/// Settings shared by every target: Swift 6 language mode is the default for tools 6.x;
/// `ExistentialAny` keeps the cost of existentials visible in the code.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
    name: "Gatehouse",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "gatehouse", targets: ["gatehouse"]),
        .executable(name: "gatehouse-emulator", targets: ["gatehouse-emulator"]),
        .library(name: "CurlClient", targets: ["CurlClient"]),
        .library(name: "GatehouseCore", targets: ["GatehouseCore"]),
        .library(name: "ProviderEmulator", targets: ["ProviderEmulator"]),
        .library(name: "GatehouseClient", targets: ["GatehouseClient"]),
        .library(name: "StandardWebhooks", targets: ["StandardWebhooks"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.20.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.3.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.34.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/jpsim/Yams.git", "5.4.0"..<"7.0.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.0.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.25.0"),
        // Queues with both ends in O(1) (already built for NIO).
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        // The operators' console: server-rendered HTML templates.
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.0.0"),
        // The configuration file (YAML or JSON), the environment and the secrets folder.
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.0.0", traits: [.defaults, "YAML"]),
        // Allocation counts per request (Tests/Benchmarks/Allocations), through its malloc interposer.
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // glibc's allocator controls (`malloc_trim`), for the serve command's heap trimming.
        .systemLibrary(name: "CMalloc"),
        // libcurl, seen through typed shims for its variadic C functions.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // The one outbound HTTP client: async/await over libcurl's multi interface. No gateway knowledge.
        .target(
            name: "CurlClient",
            dependencies: ["CCurl"],
            swiftSettings: swiftSettings
        ),
        // Signing and verifying webhook messages the Standard Webhooks way: the gateway's hook
        // calls, and the receivers Swift services write. swift-crypto only.
        .target(
            name: "StandardWebhooks",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // Writes the build's commit (`Gatehouse.commit`) before each build.
        .plugin(name: "BuildCommitPlugin", capability: .buildTool(), path: "Sources/BuildCommitPlugin"),
        // The core auth module: providers, flows, accounts, token vault, profiles, storage protocol.
        // No web-framework import.
        .target(
            name: "GatehouseCore",
            dependencies: [
                "CurlClient",
                "StandardWebhooks",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["BuildCommitPlugin"]
        ),
        // The embedded default store: SQLite through GRDB.
        .target(
            name: "GatehouseSQLite",
            dependencies: [
                "GatehouseCore",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // The store for several instances: PostgreSQL through postgres-nio.
        .target(
            name: "GatehousePostgres",
            dependencies: [
                "GatehouseCore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // The thin HTTP layer: Hummingbird routes over GatehouseCore.
        .target(
            name: "GatehouseServer",
            dependencies: [
                "GatehouseCore",
                "CurlClient",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            resources: [.copy("Resources")],
            swiftSettings: swiftSettings
        ),
        // The provider emulator: imports none of the gateway's targets.
        .target(
            name: "ProviderEmulator",
            dependencies: [
                "StandardWebhooks",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "gatehouse-emulator",
            dependencies: [
                "ProviderEmulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "gatehouse",
            dependencies: [
                "CMalloc",
                "GatehouseServer",
                "GatehouseSQLite",
                "GatehousePostgres",
                "ProviderEmulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: swiftSettings
        ),
        // The client library for native and desktop apps: Foundation (and swift-crypto, which
        // is CryptoKit on Apple platforms, for the S256 challenge); nothing of the gateway.
        .target(
            name: "GatehouseClient",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // The benchmark suite's sign-in load generator (Tests/Benchmarks): a benchmark tool,
        // not a test, over the libcurl client so that it is not what limits the measured rate.
        .executableTarget(
            name: "gatehouse-signin-load",
            dependencies: [
                "CurlClient",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tests/Benchmarks/SignInLoad",
            swiftSettings: swiftSettings
        ),
        // The benchmark's floor: bare Hummingbird routes (one passing an upstream's answer
        // through the gateway's libcurl client), built with the gateway's flags.
        .executableTarget(
            name: "gatehouse-bench-floor",
            dependencies: ["CurlClient", .product(name: "Hummingbird", package: "hummingbird")],
            path: "Tests/Benchmarks/Floor",
            swiftSettings: swiftSettings
        ),
        // Allocations per request on the in-process hot paths (ordo-one/benchmark), checked against
        // a committed baseline by Tests/Benchmarks/allocations.py.
        .executableTarget(
            name: "gatehouse-bench-allocations",
            dependencies: [
                "GatehouseServer",
                "GatehouseSQLite",
                "ProviderEmulator",
                "CurlClient",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/Benchmarks/Allocations",
            swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .testTarget(
            name: "CurlClientTests",
            dependencies: [
                "CurlClient",
                "GatehouseTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatehouseCoreTests",
            dependencies: ["GatehouseCore", "CurlClient", .product(name: "DequeModule", package: "swift-collections")],
            swiftSettings: swiftSettings
        ),
        // Helpers shared by the test targets: the PostgreSQL server of the run, private
        // clusters, throwaway certificates, running tools.
        .target(
            name: "GatehouseTestSupport",
            dependencies: [
                "GatehousePostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/GatehouseTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatehouseStorageTests",
            dependencies: [
                "GatehouseCore", "GatehouseSQLite", "GatehousePostgres", "GatehouseTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProviderEmulatorTests",
            dependencies: [
                "ProviderEmulator",
                "CurlClient",
                "GatehouseTestSupport",
                "StandardWebhooks",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP layer in-process (Hummingbird's router test client): statuses, problem
        // documents, headers.
        .testTarget(
            name: "GatehouseServerTests",
            dependencies: [
                "GatehouseServer",
                "GatehouseSQLite",
                "GatehouseTestSupport",
                "CurlClient",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatehouseClientTests",
            dependencies: ["GatehouseClient", "GatehouseCore", "GatehouseTestSupport", "CurlClient"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatehouseEndToEndTests",
            dependencies: [
                "GatehouseServer",
                "GatehouseSQLite",
                "GatehousePostgres",
                "GatehouseTestSupport",
                "ProviderEmulator",
                "CurlClient",
                "StandardWebhooks",
                .product(name: "Yams", package: "Yams"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
