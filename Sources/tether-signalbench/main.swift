// tether-signalbench: the signaling server's benchmark (`make bench-signal`). Registered
// clients of `tether signal` on one core: signals forwarded per second, forwarding latency at
// an offered rate, registrations per second against the Ed25519 verify rate, and the server's
// RSS per idle registered client.
//
//   tether-signalbench signals  --url ws://…/signal --pid P   closed loop around 1,000 clients
//   tether-signalbench latency  --url … --pid P --rate R      open loop at R signals/s
//   tether-signalbench register --url … --pid P               10,000 registrations, timed
//   tether-signalbench idle     --url … --pid P               VmRSS per idle registered client
//   tether-signalbench scale    --url … --pid P --clients N   N idle clients held: RSS, idle CPU, registration and forwarding p99
//   tether-signalbench verify                                 openssl speed ed25519 and TetherCrypto's verify
//   tether-signalbench run [--tether .build/release/tether]   all of them, each on a fresh pinned server
//
// The traffic scenarios need a server with SIGNAL_SIGNAL_RATE_LIMIT=0; every scenario needs
// SIGNAL_TRUST_PROXY=true (each client is its own forwarded address) and TURN_MODE=none.
import Foundation

let commands: [String: ([String]) -> Never] = [
    "signals": TrafficScenarios.signals, "latency": TrafficScenarios.latency,
    "register": RegistrationScenarios.register, "idle": RegistrationScenarios.idle,
    "scale": ScaleScenario.run, "verify": VerifySpeed.run, "run": RunCommand.run,
]
var arguments = Array(CommandLine.arguments.dropFirst())
let command = arguments.isEmpty ? "" : arguments.removeFirst()
guard let body = commands[command] else {
    FileHandle.standardError.write(Data("usage: tether-signalbench signals|latency|register|idle|scale|verify|run [options]   (<command> --help)\n".utf8))
    exit(2)
}
body(arguments)
