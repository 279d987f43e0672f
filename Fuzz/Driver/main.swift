// The one libFuzzer binary (scripts/fuzz builds it): FUZZ_TARGET names the harness every input
// goes to, so a single build serves every target and a finding replays with
// `FUZZ_TARGET=<target> .build/fuzz/tether-fuzz <file>`. With FUZZ_SEEDS=<directory> it writes the
// target's generated seeds there instead and exits (`scripts/fuzz --seeds`).
import Foundation
import TetherAttest
import TetherClient
import TetherSignal

struct Harness: Sendable {
    let run: @Sendable ([UInt8]) -> Void
    /// Seeds made by code: valid messages in the harness's input format, some signed with the
    /// harness's fixed keys. Seeds written by hand or kept from findings sit beside them.
    let seeds: @Sendable () -> [String: [UInt8]]
}

/// Every harness by the name scripts/fuzz and FUZZ_TARGET use.
let harnesses: [String: Harness] = [
    "cbor": Harness(run: CBORFuzz.run, seeds: { [:] }),
    "http-request": Harness(run: HTTPRequestFuzz.run, seeds: { HTTPRequestFuzz.seeds }),
    "http-response": Harness(run: HTTPResponseFuzz.run, seeds: { HTTPResponseFuzz.seeds }),
    "websocket": Harness(run: WebSocketFuzz.run, seeds: { WebSocketFuzz.seeds }),
    "admission": Harness(run: AdmissionFuzz.run, seeds: { AdmissionFuzz.seeds }),
    "relay-bodies": Harness(run: RelayBodiesFuzz.run, seeds: { RelayBodiesFuzz.seeds }),
    "pairing-link": Harness(run: PairingLinkFuzz.run, seeds: { PairingLinkFuzz.seeds }),
    "shard-map": Harness(run: ShardMapFuzz.run, seeds: { ShardMapFuzz.seeds }),
    "app-attest": Harness(run: AppAttestFuzz.run, seeds: { AppAttestFuzz.seeds }),
    "noise": Harness(run: NoiseFuzz.run, seeds: { NoiseFuzz.seeds }),
    "companion": Harness(run: CompanionFuzz.run, seeds: { CompanionFuzz.seeds }),
    "push": Harness(run: PushFuzz.run, seeds: { PushFuzz.seeds }),
    "signaling": Harness(run: SignalingFuzz.run, seeds: { SignalingFuzz.seeds }),
    "sdp": Harness(run: SDPFuzz.run, seeds: { SDPFuzz.seeds }),
]

/// Resolved once, before the first input: an unknown name ends the run instead of fuzzing nothing.
let selected: Harness = {
    let name = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? ""
    guard let harness = harnesses[name] else {
        FileHandle.standardError.write(Data("tether-fuzz: set FUZZ_TARGET to one of: \(harnesses.keys.sorted().joined(separator: " "))\n".utf8))
        exit(2)
    }
    return harness
}()

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    let harness = selected
    if let directory = ProcessInfo.processInfo.environment["FUZZ_SEEDS"] {
        for (name, bytes) in harness.seeds() {
            let url = URL(fileURLWithPath: directory).appendingPathComponent(name)
            guard (try? Data(bytes).write(to: url)) != nil else {
                FileHandle.standardError.write(Data("tether-fuzz: cannot write \(url.path)\n".utf8))
                exit(1)
            }
        }
        exit(0)
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    selected.run(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
