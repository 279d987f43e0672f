import Foundation
import TetherService
import TetherTestSupport
import XCTest

/// The admin listener's `/status` page in a real browser: headless Chromium (Debian `chromium`)
/// loads it from a running `tether relay` with parked and spliced sockets, runs its script, and
/// the figures it shows are the ones `/metrics` gives; a screenshot is taken too.
final class RelayStatusPageEndToEndTests: XCTestCase {
    private static let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }

    private func browser(_ arguments: [String]) throws -> String {
        let chromium = try XCTUnwrap(Self.chromium)
        // Headless, no sandbox (tests may run as root), and enough virtual time for two refreshes.
        let (status, out, err) = try runProcess(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                                                           "--user-data-dir=" + NSTemporaryDirectory() + "tether-chromium-\(UUID().uuidString)"]
                                                    + arguments, timeout: 90)
        XCTAssertEqual(status, 0, err.suffix(1000).description)
        return out
    }

    /// The raw value a `data-metric` box carries (as `/metrics` gives it), read from the DOM.
    private func figure(_ name: String, in dom: String) -> String? {
        guard let box = dom.range(of: #"data-metric="\#(name)" data-value=""#),
              let end = dom.range(of: "\"", range: box.upperBound..<dom.endIndex) else { return nil }
        return String(dom[box.upperBound..<end.lowerBound])
    }

    /// What a `data-metric` box shows a person: its label and its value in words.
    private func shown(_ name: String, in dom: String) -> (label: String, value: String)? {
        guard let box = dom.range(of: #"data-metric="\#(name)""#),
              let label = dom.range(of: #"<div class="name""#, range: box.upperBound..<dom.endIndex),
              let labelStart = dom.range(of: ">", range: label.upperBound..<dom.endIndex),
              let labelEnd = dom.range(of: "</div>", range: labelStart.upperBound..<dom.endIndex),
              let value = dom.range(of: #"<div class="value">"#, range: labelEnd.upperBound..<dom.endIndex),
              let valueEnd = dom.range(of: "</div>", range: value.upperBound..<dom.endIndex) else { return nil }
        return (String(dom[labelStart.upperBound..<labelEnd.lowerBound]), String(dom[value.upperBound..<valueEnd.lowerBound]))
    }

    func testTheStatusPageShowsInABrowserTheFiguresMetricsGives() throws {
        guard Self.chromium != nil else { throw XCTSkip("chromium is not installed (scripts/install-deps)") }
        let adminPort = RelayProcess.freePort()   // the admin port takes no 0
        let node = try RelayProcess(["--relay-admin-port", String(adminPort), "--relay-ws-rate-limit", "0"])
        defer { node.stop() }
        let clients = try PythonProcess(script: "relay_client.py", arguments: ["ws://127.0.0.1:\(node.port)/", "park", "3"], timeout: 120)
        defer { try? clients.input.fileHandleForWriting.close() }
        XCTAssertEqual(clients.output.fileHandleForReading.readFirstLine().trimmingCharacters(in: .whitespacesAndNewlines), #"{"parked": 3, "pairs": 1}"#)

        let page = "http://127.0.0.1:\(adminPort)/status"
        let dom = try browser(["--dump-dom", page])
        XCTAssertTrue(dom.contains(#"data-loaded="true""#), "the page's script read /metrics: \(dom.prefix(600))")
        let metrics = try runProcess("/usr/bin/curl", ["-s", "http://127.0.0.1:\(adminPort)/metrics"]).stdout
        func sample(_ name: String) -> String? {
            metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.map { String($0.split(separator: " ")[1]) }
        }
        for name in ["relay_sockets_live", "relay_rooms_live", "relay_rooms_both", "relay_rooms_mac_only", "relay_ws_upgrades_total"] {
            XCTAssertEqual(figure(name, in: dom), sample(name), name)
        }
        XCTAssertEqual(figure("relay_sockets_live", in: dom), "5", "3 parked macs and one spliced pair")
        XCTAssertEqual(figure("relay_rooms_both", in: dom), "1")
        // Sockets by state: three Macs parked, one pair spliced, none still being admitted.
        for (state, expected) in [("parked", "3"), ("spliced", "2"), ("pending", "0")] {
            XCTAssertEqual(figure("relay_sockets_by_state{state=&quot;\(state)&quot;}", in: dom), expected, state)
            XCTAssertEqual(sample("relay_sockets_by_state{state=\"\(state)\"}"), expected, state)
        }
        XCTAssertTrue(dom.contains(#"data-sample="relay_ws_upgrades_total""#), "every series is listed below the figures")
        // In words, for a person: labels, human numbers, the summary line.
        XCTAssertEqual(shown("relay_sockets_live", in: dom)?.label, "Open sockets")
        XCTAssertEqual(shown("relay_sockets_live", in: dom)?.value, "5")
        XCTAssertTrue(shown("process_resident_memory_bytes", in: dom)?.value.hasSuffix(" MiB") == true, "\(String(describing: shown("process_resident_memory_bytes", in: dom)))")
        XCTAssertTrue(dom.contains(#"data-summary="version""#) && dom.contains(TetherVersion.current), "the version is on the page")
        XCTAssertTrue(dom.contains(#"data-summary="uptime""#), "and how long it has run")
        XCTAssertTrue(dom.contains(#"data-summary="certificate""#) && dom.contains("not served here"), "and the certificate (no TLS here)")
        XCTAssertTrue(dom.contains(#"data-summary="storage""#) && dom.contains("answering"), "and whether storage answers")
        XCTAssertTrue(dom.contains("max "), "each chart states its scale")

        // Kept for people to look at: .build/test-artifacts/status-relay.png.
        let artifacts = Vectors.packageRoot().appendingPathComponent(".build/test-artifacts")
        try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        let screenshot = artifacts.appendingPathComponent("status-relay.png").path
        _ = try browser(["--window-size=1200,1000", "--screenshot=" + screenshot, page])
        let png = try Data(contentsOf: URL(fileURLWithPath: screenshot))
        XCTAssertEqual(Array(png.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "a PNG")
        XCTAssertGreaterThan(png.count, 20_000, "a rendered page, not a blank one")

        // The page itself: no external asset, never cached.
        let (_, headers, _) = try runProcess("/usr/bin/curl", ["-s", "-D", "-", "-o", "/dev/null", page])
        XCTAssertTrue(headers.lowercased().contains("content-type: text/html; charset=utf-8"), headers)
        XCTAssertTrue(headers.lowercased().contains("cache-control: no-store"), headers)
        let html = try runProcess("/usr/bin/curl", ["-s", page]).stdout
        for reference in ["src=", "href=", "url(", "@import", "https://"] { XCTAssertFalse(html.contains(reference), "no external asset: \(reference)") }
        XCTAssertEqual(html.components(separatedBy: "http://").count - 1, html.components(separatedBy: "http://www.w3.org/2000/svg").count - 1,
                       "the only absolute URL is the SVG namespace, which nothing fetches")
    }
}
