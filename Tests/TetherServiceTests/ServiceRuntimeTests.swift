import Foundation
import Synchronization
import TetherNet
import TetherService
import TetherSync
import XCTest

/// The shape every service shares, through the runtime alone: the log, verbose diagnostics,
/// draining seen on `/readyz`, and the listeners started and stopped together.
final class ServiceRuntimeTests: XCTestCase {
    private struct Listening: ServiceListenerSettings {
        var host = "127.0.0.1"
        var port: UInt16 = 0
        var tlsCertificatePath: String?
        var tlsKeyPath: String?
        var adminHost = "127.0.0.1"
        var adminPort: UInt16? = 0
    }

    private final class Hello: HTTPServerDelegate {
        func respond(to request: HTTPServerRequest) -> HTTPResponse { .text(200, "hello") }
    }

    private final class Echo: ChassisService {
        let runtime: ServiceRuntime
        init(_ runtime: ServiceRuntime) { self.runtime = runtime }
        func shutdown() { runtime.beginDraining() }
    }

    private func collected() -> (ServiceRuntime, @Sendable () -> [String]) {
        let lines = Locked<[String]>([])
        let runtime = ServiceRuntime(name: "echo", format: .plain, verbose: false) { line in lines.withLock { $0.append(line) } }
        return (runtime, { lines.withLock { $0 } })
    }

    func testDrainingTurnsReadinessOffWhileTheListenersStillServe() throws {
        let (runtime, _) = collected()
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let listeners = try runtime.startListeners(group: group, settings: Listening(), delegate: Hello(), metrics: .registry(MetricsRegistry()),
                                                   status: StatusPage(title: "echo", headline: []))
        let admin = try XCTUnwrap(runtime.adminPort)
        XCTAssertEqual(admin, listeners.admin?.port)
        XCTAssertEqual(try LoopbackHTTP.get("/readyz", port: admin).body, "ready\n")
        XCTAssertEqual(try LoopbackHTTP.get("/", port: listeners.http.port).body, "hello")

        runtime.beginDraining()
        XCTAssertTrue(runtime.isDraining)
        let reply = try LoopbackHTTP.get("/readyz", port: admin)
        XCTAssertEqual(reply.status, 503)
        XCTAssertEqual(reply.body, "not ready: accepting\n")
        XCTAssertEqual(try LoopbackHTTP.get("/", port: listeners.http.port).body, "hello", "draining alone closes nothing")

        runtime.stopListeners(grace: .seconds(1))
        XCTAssertThrowsError(try LoopbackHTTP.get("/", port: listeners.http.port), "the public listener is closed")
        XCTAssertThrowsError(try LoopbackHTTP.get("/readyz", port: admin), "and the admin listener with it")
    }

    func testTheServicesOwnChecksFollowAccepting() throws {
        let (runtime, _) = collected()
        runtime.readiness.register("storage") { false }
        XCTAssertEqual(runtime.readiness.failing(), ["storage"])
        runtime.beginDraining()
        XCTAssertEqual(runtime.readiness.failing(), ["accepting", "storage"])
    }

    func testDiagnosticsAreWrittenOnlyWhileVerboseAndNotBuiltOtherwise() throws {
        let (runtime, lines) = collected()
        let service = Echo(runtime)
        let built = Atomic(0)
        func text() -> String {
            built.add(1, ordering: .relaxed)
            return "echo: detail"
        }
        runtime.diagnostic(text())
        XCTAssertEqual(built.load(ordering: .relaxed), 0, "off: the line is not even built")
        service.verbose = true
        XCTAssertTrue(runtime.verbose)
        runtime.diagnostic(text())
        service.note("echo: from the host program")
        runtime.line("echo: warned", level: .warning)
        XCTAssertEqual(lines(), ["echo: detail", "echo: from the host program", "echo: warned"])
    }

    func testACertificateReloadBeforeStartOrWithoutTLSSaysSo() throws {
        let (runtime, _) = collected()
        let service = Echo(runtime)
        XCTAssertEqual(service.reloadCertificates(), ["echo: SIGHUP: not serving yet"])
        XCTAssertNil(service.adminPort)
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        var settings = Listening()
        settings.adminPort = nil
        try runtime.startListeners(group: group, settings: settings, delegate: Hello(), metrics: .registry(MetricsRegistry()),
                                   status: StatusPage(title: "echo", headline: []))
        defer { runtime.stopListeners(grace: .zero) }
        XCTAssertNil(service.adminPort, "no admin port set: no admin listener")
        XCTAssertEqual(service.reloadCertificates(), ["echo: SIGHUP: no TLS certificate to reload"])
    }
}
