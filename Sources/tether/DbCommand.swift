import Foundation
import Glibc
import TetherStore

/// `tether db migrate`: what the services' PostgreSQL schemas are missing, and (`--apply`) the
/// same steps applied. The services migrate by themselves when they start; this lets an operator
/// see the steps first, or apply them before a rolling upgrade.
func runDbCommand(_ arguments: [String]) {
    var arguments = arguments
    let help = """
    usage: tether db migrate [--apply] [--config ENV-FILE] [--relay-db URL] [--push-db URL] [--signal-db URL]

    Shows, for each PostgreSQL database configured (RELAY_DB, PUSH_DB, SIGNAL_DB as postgres://
    URLs, or the flags), the schema steps it is missing; with --apply, applies them in one
    transaction per component under a lock, as a starting service would. SQLite files need no
    step: a service creates and upgrades its own file when it opens it.

    """
    if arguments.first != "migrate" || arguments.contains("--help") || arguments.contains("-h") {
        print(help, terminator: "")
        exit(arguments.contains("--help") || arguments.contains("-h") ? 0 : 2)
    }
    arguments.removeFirst()
    let apply = arguments.contains("--apply")
    arguments.removeAll { $0 == "--apply" }
    let environment = operatorEnvironment(&arguments, command: "db", flags: [("--relay-db", "RELAY_DB"), ("--push-db", "PUSH_DB"), ("--signal-db", "SIGNAL_DB")])
    guard arguments.isEmpty else { fail("db: unexpected \(arguments.joined(separator: " ")) (see --help)") }

    let components: [(PostgresSchema.Component, String)] = [(.relay, "RELAY_DB"), (.push, "PUSH_DB"), (.signal, "SIGNAL_DB")]
    var configured = 0
    for (component, variable) in components {
        guard let setting = environment[variable], case let .postgres(url) = StoreLocation(setting) else { continue }
        configured += 1
        let name = StoreLocation(setting).display
        do {
            let pool = try PostgresPool(PostgresPool.Settings(url: url, size: 1))
            let steps = apply ? try PostgresSchema.migrate(component, pool: pool) : try PostgresSchema.pending(component, pool: pool)
            guard !steps.isEmpty else {
                print("db: \(component.rawValue) schema in \(name) is up to date (version \(PostgresSchema.migrations(of: component).last?.version ?? 0))")
                continue
            }
            print("db: \(component.rawValue) schema in \(name): \(apply ? "applied" : "would apply") \(steps.count) step\(steps.count == 1 ? "" : "s")")
            for step in steps { print("  \(step.version): \(step.summary)") }
            if !apply {
                for step in steps { print(step.sql.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n")) }
            }
        } catch {
            fail("db: \(variable): \(error)", code: 1)
        }
    }
    if configured == 0 { fail("db: no postgres:// URL in RELAY_DB, PUSH_DB or SIGNAL_DB (SQLite files migrate themselves)", code: 1) }
    exit(0)
}
