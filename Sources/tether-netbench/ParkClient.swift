import Foundation
import Glibc
import TetherNet
import Synchronization

/// `tether-netbench park URL -n N --pid PID [--ca ca.pem] [--hold S]`: opens N WebSockets (ws:// or
/// wss://), admits each as a mac in its own room, and reports the server's RSS growth per
/// connection. wsload speaks no TLS, so this is how the TLS idle cost is measured, and with a
/// ws:// URL the same harness gives the plain figure for comparison. `--hold S` keeps them open
/// S seconds more before the reading (the server's periodic work, a heap trim say, has run).
enum ParkClient {
    static func run(_ arguments: [String]) throws {
        var url = "ws://127.0.0.1:9202/"
        var count = 1000
        var pid: Int32 = 0
        var ca: String?
        var hold = 2.0
        var it = arguments.makeIterator()
        while let argument = it.next() {
            switch argument {
            case "-n": count = Int(it.next() ?? "") ?? count
            case "--pid": pid = Int32(it.next() ?? "") ?? 0
            case "--ca": ca = it.next()
            case "--hold": hold = Double(it.next() ?? "") ?? hold
            default: url = argument
            }
        }
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)

        let group = try EventLoopGroup(count: 1)
        let tls = try ca.map { try TLSClientContext(caFile: $0) }
        let before = rss(pid)
        let admitted = ParkCounter()
        let inFlight = DispatchSemaphore(value: 200)
        for i in 0..<count {
            inFlight.wait()
            let room = String(format: "%064x", i + 1)
            let mac = ParkedMac(counter: admitted, inFlight: inFlight)
            WebSocketClient.connect(url, headers: HTTPHeaders([("x-relay-room", room)]), tls: tls, delegate: mac, on: group.loops[0]) { result in
                switch result {
                case let .success(socket):
                    mac.socket = socket
                    socket.send(text: Array(#"{"v":1,"role":"mac"}"#.utf8))
                case let .failure(error):
                    FileHandle.standardError.write(Data("connect failed: \(error)\n".utf8))
                    admitted.fail()
                    inFlight.signal()
                }
            }
        }
        for _ in 0..<200 { inFlight.wait() }
        Thread.sleep(forTimeInterval: hold)   // let the server settle
        let after = rss(pid)
        let alive = admitted.admitted
        let perConnection = alive > 0 ? Double(after - before) / Double(alive) : 0
        print(#"{"url":"\#(url)","held_s":\#(hold),"admitted":\#(alive),"failed":\#(admitted.failed),"rss_before_kb":\#(before / 1024),"rss_after_kb":\#(after / 1024),"rss_per_connection_bytes":\#(Int(perConnection))}"#)
        exit(0)
    }

    /// VmRSS of a process, in bytes.
    static func rss(_ pid: Int32) -> Int {
        guard pid > 0, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
        return (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
    }
}

final class ParkCounter: Sendable {
    private let ok = Atomic(0)
    private let bad = Atomic(0)
    func admit() { ok.add(1, ordering: .relaxed) }
    func fail() { bad.add(1, ordering: .relaxed) }
    var admitted: Int { ok.load(ordering: .relaxed) }
    var failed: Int { bad.load(ordering: .relaxed) }
}

/// One parked mac: hello, then an empty proof, then silence (pings are answered automatically).
final class ParkedMac: WebSocketDelegate, @unchecked Sendable {
    let counter: ParkCounter
    let inFlight: DispatchSemaphore
    var socket: WebSocketConnection?
    private var step = 0

    init(counter: ParkCounter, inFlight: DispatchSemaphore) {
        self.counter = counter
        self.inFlight = inFlight
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) {
        step += 1
        if step == 1 {
            socket.send(text: Array("{}".utf8))
        } else if step == 2 {
            if String(decoding: text, as: UTF8.self).contains("\"ok\":true") { counter.admit() } else { counter.fail() }
            inFlight.signal()
        }
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {}

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        if step < 2 {
            counter.fail()
            inFlight.signal()
        }
        self.socket = nil
    }
}
