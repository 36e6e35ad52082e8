import GatehouseCore
import Testing

/// The operator claim named for the gateway (`GATEHOUSE_ADMIN_CLAIM`, protected console on or
/// off) and the one the console admits by are one claim.
@Suite struct OperatorClaimConfigurationTests {
    func configuration(operatorClaim: String?, console: ConsoleConfiguration?) -> GatewayConfiguration {
        var configuration = GatewayConfiguration(
            publicURL: "https://gw.example", returnToAllowList: ["https://gw.example/admin/"],
            github: GitHubConfiguration(clientID: "c", clientSecret: "s"))
        configuration.operatorClaim = operatorClaim
        configuration.console = console
        return configuration
    }

    @Test("a gateway claim and a console claim that differ stop the start; the same one, or either alone, pass")
    func claimsAgree() throws {
        let differing = configuration(operatorClaim: "staff", console: ConsoleConfiguration(operators: [], operatorClaim: "admin"))
        #expect(throws: GatehouseError.self) { try differing.validate() }
        try configuration(operatorClaim: "staff", console: ConsoleConfiguration(operators: [], operatorClaim: "staff")).validate()
        try configuration(operatorClaim: "staff", console: nil).validate()
        try configuration(operatorClaim: nil, console: ConsoleConfiguration(operators: [], operatorClaim: "staff")).validate()
        try configuration(operatorClaim: "staff", console: ConsoleConfiguration(operators: ["ops@example.com"])).validate()
        // An empty name names none: the console's claim is the one protected.
        let unnamed = configuration(operatorClaim: "", console: ConsoleConfiguration(operators: [], operatorClaim: "staff"))
        try unnamed.validate()
        #expect(unnamed.protectedOperatorClaim == "staff")
        #expect(configuration(operatorClaim: "staff", console: nil).protectedOperatorClaim == "staff")
        #expect(configuration(operatorClaim: nil, console: nil).protectedOperatorClaim == nil)
        // The console signs operators in with return_to <public URL>/admin/, which the allow-list must admit.
        var unreachable = configuration(operatorClaim: nil, console: ConsoleConfiguration(operators: ["ops@example.com"]))
        unreachable.returnToAllowList = ["https://app.example/"]
        let refused = #expect(throws: GatehouseError.self) { try unreachable.validate() }
        #expect(refused?.detail.contains("add https://gw.example/admin/") == true, "\(String(describing: refused))")
    }

    @Test("operators named by email need one account per verified email: without it the start stops; operators named by uid do not")
    func emailOperatorsNeedOneAccountPerEmail() throws {
        var shared = configuration(operatorClaim: nil, console: ConsoleConfiguration(operators: ["u1", "ops@example.com"]))
        shared.oneAccountPerEmail = false
        let refused = #expect(throws: GatehouseError.self) { try shared.validate() }
        #expect(refused?.detail.contains("ops@example.com") == true && refused?.detail.contains("GATEHOUSE_ONE_ACCOUNT_PER_EMAIL") == true)
        shared.console = ConsoleConfiguration(operators: ["u1"], operatorClaim: "staff")
        try shared.validate()
        shared.oneAccountPerEmail = true
        shared.console = ConsoleConfiguration(operators: ["u1", "ops@example.com"])
        try shared.validate()
    }

    @Test("a reserved claim name, which no account can carry, stops the start")
    func reservedNameRefused() throws {
        for name in ["email", "sub", "Gatehouse_admin", "scope"] {
            #expect(throws: GatehouseError.self, "\(name)") { try configuration(operatorClaim: name, console: nil).validate() }
            #expect(throws: GatehouseError.self, "\(name)") {
                try configuration(operatorClaim: nil, console: ConsoleConfiguration(operators: [], operatorClaim: name)).validate()
            }
        }
        try configuration(operatorClaim: "staff", console: nil).validate()
    }
}
