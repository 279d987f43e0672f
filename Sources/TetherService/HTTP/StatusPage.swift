/// The status page on the admin listener (`GET /status`), made for an on-call person to read in
/// ten seconds: one plain HTML document with its script and style inline (no external asset, so
/// it works on an air-gapped host and leaks nothing to a CDN). It reads the listener's own
/// `/metrics` every two seconds and shows:
///
/// - a summary line: the version, how long the process has run, when the served certificate
///   expires, whether storage answers;
/// - the service's headline figures in words, with human numbers (`12,408`, `1.5 MiB`,
///   `3 h 20 min`), each charted over its last two minutes with its scale (counters as a rate
///   per second);
/// - every labelled counter by its labels (refusals, closes, outcomes by reason), under its HELP
///   text, largest first;
/// - and, folded, every series of the exposition, so the page never shows a figure `/metrics`
///   does not.
///
/// The figures carry `data-metric` / `data-value` / `data-sample` attributes (the raw value as
/// `/metrics` gives it), which is how a browser test reads them back.
public struct StatusPage: Sendable {
    /// A headline figure: the metric, what a person calls it, and how its value reads.
    public struct Figure: Sendable, ExpressibleByStringLiteral {
        /// How a figure's value is written for a person.
        public enum Unit: String, Sendable {
            /// A count (`12,408`).
            case count
            /// Bytes (`1.5 MiB`).
            case bytes
            /// Seconds of a duration (`3 h 20 min`).
            case seconds
            /// 1 or 0 (`yes` / `no`).
            case yes
        }

        /// The metric's name in the exposition (`relay_rooms_resident`).
        public var metric: String
        /// What a person calls it (`resident rooms`).
        public var label: String
        /// How its value reads.
        public var unit: Unit

        /// A figure for `metric`, labelled `label`, read as `unit`.
        public init(_ metric: String, _ label: String, unit: Unit = .count) {
            self.metric = metric
            self.label = label
            self.unit = unit
        }

        /// A figure labelled with its metric name (tests, a service without words yet).
        public init(stringLiteral metric: String) { self.init(metric, metric) }
    }

    /// The page's heading, e.g. `tether relay`.
    public var title: String
    /// The figures shown large and charted, in order (one the exposition lacks is skipped).
    public var headline: [Figure]

    /// A page headed `title` showing `headline` large, in order.
    public init(title: String, headline: [Figure]) {
        self.title = title
        self.headline = headline
    }

    /// The document. Titles, names and labels are the service's own constants, never request
    /// data, and are escaped anyway.
    public var html: String {
        let figures = headline.map { "[\(Self.jsString($0.metric)),\(Self.jsString($0.label)),\(Self.jsString($0.unit.rawValue))]" }.joined(separator: ",")
        return Self.template
            .replacingOccurrences(of: "__TITLE__", with: Self.escape(title))
            .replacingOccurrences(of: "__HEADLINE__", with: figures)
    }

    /// A JavaScript string literal safe inside the page's `<script>`: quotes and backslashes
    /// escaped, and `<`, `>` and `&` as `\u` escapes so no text can close the script element.
    static func jsString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "<", ">", "&", "\n", "\r", "\u{2028}", "\u{2029}":
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    static let template = #"""
    <!doctype html>
    <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
    <title>__TITLE__ status</title>
    <style>
    body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d1d1f;background:#fafafa}
    h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1em;margin:1.5em 0 .5em;color:#444}
    #updated{color:#666;margin-bottom:.8em}
    #summary{display:flex;flex-wrap:wrap;gap:8px 24px;margin-bottom:1.2em;font-size:1.05em}
    #summary .item .key{color:#666}#summary .bad{color:#b00;font-weight:600}#summary .warn{color:#a60;font-weight:600}
    #headline,#reasons{display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:12px}
    .figure,.reason{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px}
    .figure .name{color:#555;font-size:.9em}.figure .value{font-size:1.8em;font-weight:600}.figure .rate{color:#555;font-size:.85em}
    .figure svg{width:100%;height:40px;display:block}.figure polyline{fill:none;stroke:#2a6df4;stroke-width:1.5}
    .figure .scale{color:#888;font-size:.75em;display:flex;justify-content:space-between}
    .reason .help{color:#555;font-size:.9em;margin-bottom:4px}.reason table{width:100%}
    .reason td{padding:1px 4px;font-size:.9em}.reason td.value{text-align:right;font-weight:600}
    details{margin-top:1.5em}summary{cursor:pointer;color:#444}
    #samples{border-collapse:collapse;background:#fff;width:100%}#samples td{border-bottom:1px solid #eee;padding:3px 8px;font-family:ui-monospace,monospace;font-size:.9em}
    #samples td.value{text-align:right}.error{color:#b00}
    </style></head><body>
    <h1>__TITLE__</h1><div id="updated">loading /metrics…</div>
    <div id="summary"></div>
    <div id="headline"></div>
    <h2>By reason</h2><div id="reasons"></div>
    <details><summary>Every series of /metrics</summary><table id="samples"></table></details>
    <script>
    "use strict";
    const HEADLINE = [__HEADLINE__];
    const POINTS = 60, PERIOD_MS = 2000;
    const history = {}; let previous = null;
    function parse(text) {
      const samples = new Map(), types = {}, help = {};
      for (const line of text.split("\n")) {
        if (line.startsWith("# TYPE ")) { const p = line.split(" "); types[p[2]] = p[3]; continue; }
        if (line.startsWith("# HELP ")) { const rest = line.slice(7), cut = rest.indexOf(" "); help[rest.slice(0, cut)] = rest.slice(cut + 1); continue; }
        if (line === "" || line.startsWith("#")) continue;
        const cut = line.lastIndexOf(" ");
        samples.set(line.slice(0, cut), Number(line.slice(cut + 1)));
      }
      return { samples, types, help };
    }
    function count(v) { return Number.isInteger(v) ? v.toLocaleString("en-US") : v.toLocaleString("en-US", { maximumFractionDigits: 2 }); }
    function bytes(v) {
      const units = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
      while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
      return (i === 0 ? String(v) : v.toFixed(v < 10 ? 1 : 0)) + " " + units[i];
    }
    function duration(s) {
      if (s < 60) return (Math.round(Math.max(0, s) * 10) / 10) + " s";
      s = Math.round(s);
      const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
      if (d > 0) return d + " d " + h + " h"; if (h > 0) return h + " h " + m + " min"; if (m > 0) return m + " min " + (s % 60) + " s";
      return s + " s";
    }
    function human(v, unit) {
      if (unit === "bytes") return bytes(v); if (unit === "seconds") return duration(v); if (unit === "yes") return v >= 1 ? "yes" : "no";
      return count(v);
    }
    function rateText(v, unit) { return (unit === "bytes" ? bytes(v) : count(Math.round(v * 100) / 100)) + "/s"; }
    function cell(row, text, cls) { const td = row.insertCell(); td.textContent = text; if (cls) td.className = cls; return td; }
    function chart(points) {
      const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
      svg.setAttribute("viewBox", "0 0 " + (POINTS - 1) + " 40"); svg.setAttribute("preserveAspectRatio", "none");
      const max = Math.max(1, ...points), line = document.createElementNS(svg.namespaceURI, "polyline");
      line.setAttribute("points", points.map((v, i) => (i + POINTS - points.length) + "," + (38 - 36 * v / max)).join(" "));
      svg.appendChild(line); return { svg, max };
    }
    function summaryItem(key, value, cls, name) {
      const item = document.createElement("span"); item.className = "item"; if (name) item.dataset.summary = name;
      const k = document.createElement("span"); k.className = "key"; k.textContent = key + " ";
      const v = document.createElement("span"); v.textContent = value; if (cls) v.className = cls;
      item.append(k, v); return item;
    }
    function renderSummary(now, samples) {
      const summary = document.getElementById("summary"); summary.textContent = "";
      for (const [sample] of samples) {
        const m = /^tether_build_info\{.*version="([^"]*)"/.exec(sample);
        if (m) summary.appendChild(summaryItem("version", m[1], "", "version"));
      }
      if (samples.has("process_start_time_seconds")) summary.appendChild(summaryItem("up", duration(now / 1000 - samples.get("process_start_time_seconds")), "", "uptime"));
      if (samples.has("tether_tls_certificate_expiry_timestamp_seconds")) {
        const expiry = samples.get("tether_tls_certificate_expiry_timestamp_seconds");
        if (expiry === 0) summary.appendChild(summaryItem("TLS", "not served here", "", "certificate"));
        else {
          const left = expiry - now / 1000;
          summary.appendChild(summaryItem("certificate", left <= 0 ? "EXPIRED" : "expires in " + duration(left), left <= 0 ? "bad" : left < 7 * 86400 ? "warn" : "", "certificate"));
        }
      }
      for (const [sample, value] of samples) {
        if (!/_storage_available$/.test(sample)) continue;
        summary.appendChild(summaryItem("storage", value >= 1 ? "answering" : "FAILING", value >= 1 ? "" : "bad", "storage"));
      }
      const failures = samples.get('tether_acme_issuances_total{outcome="failure"}');
      if (failures > 0) summary.appendChild(summaryItem("ACME", failures + " failed issuance" + (failures === 1 ? "" : "s"), "warn", "acme"));
    }
    function renderReasons({ samples, types, help }) {
      const reasons = document.getElementById("reasons"); reasons.textContent = ""; const families = new Map();
      for (const [sample, value] of samples) {
        const brace = sample.indexOf("{"); if (brace < 0) continue;
        const name = sample.slice(0, brace);
        if (types[name] !== "counter" || name === "tether_acme_issuances_total") continue;
        const labels = sample.slice(brace + 1, -1).replace(/"/g, "").replace(/,/g, ", ");
        (families.get(name) || families.set(name, []).get(name)).push([labels, value, sample]);
      }
      for (const [name, rows] of families) {
        const box = document.createElement("div"); box.className = "reason"; box.dataset.family = name;
        const title = document.createElement("div"); title.className = "help"; title.textContent = (help[name] || name); title.title = name;
        const table = document.createElement("table");
        for (const [labels, value, sample] of rows.sort((a, b) => b[1] - a[1])) {
          const row = table.insertRow(); row.dataset.sample = sample; cell(row, labels); cell(row, count(value), "value").dataset.value = String(value);
        }
        box.append(title, table); reasons.appendChild(box);
      }
      if (families.size === 0) reasons.textContent = "nothing refused or closed by reason yet";
    }
    function render(now, parsed) {
      const { samples, types } = parsed;
      renderSummary(now, samples);
      const head = document.getElementById("headline"); head.textContent = "";
      for (const [name, label, unit] of HEADLINE) {
        if (!samples.has(name)) continue;
        const value = samples.get(name), counter = types[name] === "counter";
        const rate = counter && previous && previous.samples.has(name) ? Math.max(0, value - previous.samples.get(name)) * 1000 / (now - previous.at) : null;
        const series = history[name] = (history[name] || []).concat([counter ? (rate ?? 0) : value]).slice(-POINTS);
        const box = document.createElement("div"); box.className = "figure"; box.dataset.metric = name; box.dataset.value = String(value);
        const title = document.createElement("div"); title.className = "name"; title.textContent = label; title.title = name;
        const figure = document.createElement("div"); figure.className = "value"; figure.textContent = human(value, unit);
        box.append(title, figure);
        if (counter) { const r = document.createElement("div"); r.className = "rate"; r.textContent = "now " + rateText(rate ?? 0, unit); box.appendChild(r); }
        const { svg, max } = chart(series);
        const scale = document.createElement("div"); scale.className = "scale";
        const left = document.createElement("span"); left.textContent = "2 min ago"; const right = document.createElement("span");
        right.textContent = "max " + (counter ? rateText(max, unit) : human(max, unit));
        scale.append(left, right); box.append(svg, scale); head.appendChild(box);
      }
      renderReasons(parsed);
      const table = document.getElementById("samples"); table.textContent = "";
      for (const [sample, value] of samples) {
        const row = table.insertRow(); row.dataset.sample = sample; cell(row, sample); cell(row, String(value), "value");
      }
      previous = { at: now, samples };
    }
    async function refresh() {
      const status = document.getElementById("updated");
      try {
        const response = await fetch("/metrics", { cache: "no-store" });
        if (!response.ok) throw new Error("HTTP " + response.status);
        const now = Date.now(); render(now, parse(await response.text()));
        status.className = ""; status.textContent = "updated " + new Date(now).toLocaleTimeString() + ", every 2 s";
        document.body.dataset.loaded = "true";
      } catch (error) { status.className = "error"; status.textContent = "cannot read /metrics: " + error.message; }
    }
    refresh(); setInterval(refresh, PERIOD_MS);
    </script></body></html>
    """#
}
