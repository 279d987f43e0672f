public import Foundation
import Glibc

/// A PostgreSQL server of the test's own: `initdb` in a temporary directory, `pg_ctl` on a free
/// loopback port, trust authentication for the one user `tether`, gone at `shutdown()`. Debian's
/// `postgresql` package provides the binaries (`scripts/install-deps`). PostgreSQL refuses to run
/// as root, so under root (CI) every server command runs as the `postgres` system user, which
/// owns the directory.
public final class PostgresServer: @unchecked Sendable {   // set up in init; `stop`/`start` from one test thread
    public enum Failure: Error, CustomStringConvertible {
        case missing(String)
        case command(String, String)
        public var description: String {
            switch self {
            case let .missing(what): "PostgreSQL test server: \(what) (scripts/install-deps installs postgresql)"
            case let .command(command, output): "PostgreSQL test server: \(command) failed: \(output)"
            }
        }
    }

    public let port: UInt16
    public let directory: URL
    private let bin: URL
    private var databases = 0

    /// The URL of database `name` on this server.
    public func url(database name: String = "postgres") -> String { "postgres://tether@127.0.0.1:\(port)/\(name)" }

    /// - Parameter durable: false turns fsync off (tests never crash the machine, and run faster);
    ///   a benchmark keeps PostgreSQL's defaults.
    public init(durable: Bool = false) throws {
        bin = try Self.binaries()
        port = RelayProcess.freePort()   // before start: PostgreSQL takes no port 0, and restarts reuse it
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-pg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        if getuid() == 0 { try run("/bin/chown", ["-R", "postgres:postgres", directory.path], asServerUser: false) }
        try run(bin.appendingPathComponent("initdb").path,
                ["-D", dataDirectory, "-U", "tether", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"])
        var settings = ["listen_addresses = '127.0.0.1'", "port = \(port)", "unix_socket_directories = '\(directory.path)'",
                        "max_connections = 200", "logging_collector = off"]
        // fsync off survives anything but the machine's own crash, including `stop()`'s immediate
        // shutdown (a commit is in the kernel's cache once acknowledged); asynchronous commit
        // would not, so it stays on.
        if !durable { settings += ["fsync = off"] }
        try (settings.joined(separator: "\n") + "\n").appendLine(to: URL(fileURLWithPath: dataDirectory).appendingPathComponent("postgresql.conf"))
        try start()
    }

    deinit { shutdown() }

    private var dataDirectory: String { directory.appendingPathComponent("data").path }

    /// Starts the server (again) and waits until it accepts connections.
    public func start() throws {
        try run(bin.appendingPathComponent("pg_ctl").path, ["-D", dataDirectory, "-l", directory.appendingPathComponent("server.log").path, "-w", "-t", "30", "start"])
    }

    /// Stops the server. `immediate` is as abrupt as a crash (without losing a commit), and the
    /// next `start()` runs crash recovery, which under load kept PostgreSQL refusing connections
    /// ("not yet accepting connections") for over a minute; `fast` (the default) also ends every
    /// connection at once, as a client sees an outage, but shuts down cleanly, so a restart is quick.
    public func stop(immediate: Bool = false) throws {
        try run(bin.appendingPathComponent("pg_ctl").path, ["-D", dataDirectory, "-m", immediate ? "immediate" : "fast", "-w", "stop"])
    }

    /// Freezes the server — the postmaster and every process it started — as a hung host, a
    /// stuck disk or a paused VM would: connections stay open, the kernel still accepts and
    /// acknowledges, and nothing answers. `resume()` lets it go on where it stopped.
    public func pause() throws { try signalEveryProcess(SIGSTOP) }

    public func resume() throws { try signalEveryProcess(SIGCONT) }

    /// The postmaster (first line of `postmaster.pid`) and its children, by `/proc/<pid>/stat`'s
    /// parent field; the postmaster first on a stop, last on a continue, so none of them acts on
    /// a half-frozen server.
    private func signalEveryProcess(_ signal: Int32) throws {
        let pidFile = directory.appendingPathComponent("data/postmaster.pid").path
        guard let text = FileManager.default.contents(atPath: pidFile).flatMap({ String(decoding: $0, as: UTF8.self) }),
              let postmaster = text.split(separator: "\n").first.flatMap({ pid_t($0) }) else {
            throw Failure.missing("postmaster.pid (the server is not running)")
        }
        let children = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry), let stat = FileManager.default.contents(atPath: "/proc/\(entry)/stat"),
                  let close = String(decoding: stat, as: UTF8.self).lastIndex(of: ")") else { return nil }
            // After "pid (comm) state ": the parent's pid.
            let fields = String(decoding: stat, as: UTF8.self)[close...].split(separator: " ")
            return fields.count > 2 && pid_t(fields[2]) == postmaster ? pid : nil
        }
        let order = signal == SIGSTOP ? [postmaster] + children : children + [postmaster]
        for pid in order { kill(pid, signal) }
    }

    /// A new empty database; returns its URL.
    public func createDatabase() throws -> String {
        databases += 1
        let name = "tether_\(databases)"
        try run(bin.appendingPathComponent("createdb").path, ["-h", "127.0.0.1", "-p", String(port), "-U", "tether", name])
        return url(database: name)
    }

    /// Runs one SQL statement with `psql` (a test's independent look at what was stored).
    public func query(_ sql: String, database: String = "postgres") throws -> String {
        try run(bin.appendingPathComponent("psql").path, ["-h", "127.0.0.1", "-p", String(port), "-U", "tether", "-d", database, "-At", "-c", sql])
    }

    /// Stops the server and removes its directory.
    public func shutdown() {
        _ = try? resume()
        _ = try? stop(immediate: true)
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs a server command to completion and returns its standard output; standard error is
    /// kept apart (a warning is never read as a query's answer) and shown only if it fails. Both
    /// go to files rather than pipes: `pg_ctl start` leaves a daemon behind, and a pipe it
    /// inherited would never reach end-of-file.
    ///
    /// The command runs in the server's own directory, which the `postgres` user owns: the
    /// test's working directory may be one that user cannot enter (a clone in root's 0700 home),
    /// and PostgreSQL's tools change to their starting directory and fail there.
    @discardableResult
    private func run(_ path: String, _ arguments: [String], asServerUser: Bool = true) throws -> String {
        let command = ["/usr/bin/env", "--chdir", directory.path, path] + arguments
        let argv = getuid() == 0 && asServerUser ? ["/usr/sbin/runuser", "-u", "postgres", "--"] + command : command
        let output = directory.appendingPathComponent("command-\(UUID().uuidString).out").path
        let errors = output + ".err"
        defer {
            unlink(output)
            unlink(errors)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errors, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var pid: pid_t = 0
        let cArguments = argv.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        guard posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ) == 0 else { throw Failure.missing("cannot run \(argv[0])") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        func read(_ file: String) -> String {
            ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // Exited normally with status 0 (the wait status' low 7 bits are the signal, the next 8 the code).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw Failure.command(URL(fileURLWithPath: path).lastPathComponent, [read(output), read(errors)].filter { !$0.isEmpty }.joined(separator: "\n"))
        }
        return read(output)
    }

    /// The newest installed server's `bin` directory.
    private static func binaries() throws -> URL {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root.path))?.compactMap { Int($0) }.sorted() ?? []
        guard let newest = versions.last else { throw Failure.missing("no server under /usr/lib/postgresql") }
        return root.appendingPathComponent("\(newest)/bin")
    }

    /// Whether a server can be started here (tests that need one say why they cannot run).
    public static var isInstalled: Bool { (try? binaries()) != nil }
}

private extension String {
    func appendLine(to file: URL) throws {
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(utf8))
    }
}
