// tether-relaybench: the storage-latency scenario. The relay's store is made slow on purpose
// (a fixed wait before every call, as a networked database's round trip); 5,000 established
// rooms reconnect at once with signed joins while 100 spliced pairs exchange 64 B frames. The
// pairs' RTT p99 with the slow store should stay within 1.5× of the undelayed run — storage is
// kept off the relay's event loops — and the report says how long every room took to come back.
//
//   tether-relaybench serve --port P [--store-delay-ms D] [--db PATH] [--rooms N]   the relay
//   tether-relaybench load  --port P [--rooms N] [--pairs M] [--seconds S]           the clients
//   tether-relaybench run   [--delays 0,2] [--reps R] ...                            both, compared
//   tether-relaybench admit --port P [--rooms N] [--concurrency C]                   admissions/s and latency
import Foundation

let usage = """
usage: tether-relaybench serve|load|run|admit [options]   (tether-relaybench <command> --help)

"""

var arguments = Array(CommandLine.arguments.dropFirst())
let command = arguments.isEmpty ? "" : arguments.removeFirst()
if arguments.contains("--help") || arguments.contains("-h") {
    let help = ["serve": ServeCommand.usage, "load": LoadCommand.usage, "run": RunCommand.usage, "admit": AdmitCommand.usage][command] ?? usage
    print(help, terminator: "")
    exit(0)
}
switch command {
case "serve": ServeCommand.run(arguments)
case "load": await LoadCommand.run(arguments)
case "run": RunCommand.run(arguments)
case "admit": await AdmitCommand.run(arguments)
default:
    FileHandle.standardError.write(Data(usage.utf8))
    exit(2)
}
