import TetherPush
import TetherRelay
import TetherService
import TetherSignal

/// `tether(1)` in roff, as `make deb` installs it: the command list from the usage text and
/// every setting of the three services from their tables, so the page says what this binary does.
enum ManPage {
    static func text(usage: String) -> String {
        var page = ".TH TETHER 1 \"\" \"tether \(TetherVersion.current)\" \"User Commands\"\n"
        page += ".SH NAME\ntether \\- self\\-hosted backend for companion apps: relay, push relay, signaling server and clients\n"
        page += ".SH SYNOPSIS\n.B tether\n\\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n"
        page += ".SH COMMANDS\n"
        for line in usage.split(separator: "\n") where line.hasPrefix("  ") {
            let words = line.drop { $0 == " " }
            guard let space = words.firstIndex(of: " ") else { continue }
            page += ".TP\n.B \(SettingsTable.roff(String(words[..<space])))\n"
            page += SettingsTable.roff(words[space...].trimmingCharacters(in: .whitespaces)) + "\n"
        }
        page += ".PP\n\\fBtether\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR explains a command.\n"
        for (name, table) in [("RELAY", RelayConfiguration.settingsTable), ("PUSH", PushConfiguration.settingsTable),
                              ("SIGNAL", SignalConfiguration.settingsTable)] {
            page += ".SH \(name) SETTINGS\n"
            page += "Each is read from the \\fB\\-\\-config\\fR env\\-file, the environment, or its flag (flags win).\n"
            page += table.manSection
        }
        page += ".SH SIGNALS\n.TP\n.B SIGTERM, SIGINT, SIGQUIT\ndrain and exit 0\n.TP\n.B SIGHUP\nreload the TLS certificate; apply the log level, verbose logging and new certificate paths from the \\fB\\-\\-config\\fR file, and name the other settings changed there, which wait for a restart\n"
        page += ".TP\n.B SIGUSR2\nturn verbose diagnostics on or off\n"
        page += ".SH FILES\n.TP\n.I /etc/tether/relay.env, /etc/tether/push.env, /etc/tether/signal.env\nthe services' settings\n"
        page += ".TP\n.I /usr/share/doc/tether/deployment.md\nthe deployment guide\n"
        return page
    }
}
