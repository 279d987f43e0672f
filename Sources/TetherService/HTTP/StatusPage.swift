/// The status page on the admin listener (`GET /status`): one plain HTML document with its
/// script and style inline (no external asset, so it works on an air-gapped host and leaks
/// nothing to a CDN). It reads the listener's own `/metrics` every two seconds and shows the
/// service's headline figures large, each with a chart of its last two minutes (counters as a
/// rate per second), and below them every series of the exposition, so the page never shows a
/// figure `/metrics` does not. The figures carry `data-metric` / `data-sample` attributes, which
/// is how a browser test reads them back.
public struct StatusPage: Sendable {
    /// The page's heading, e.g. `tether relay`.
    public var title: String
    /// Metric names shown large and charted, in order (a name the exposition lacks is skipped).
    public var headline: [String]

    public init(title: String, headline: [String]) {
        self.title = title
        self.headline = headline
    }

    /// The document. Titles and names are the service's own constants, never request data, and
    /// are escaped anyway.
    public var html: String {
        let names = headline.map { "\"\(Self.escape($0))\"" }.joined(separator: ",")
        return Self.template
            .replacingOccurrences(of: "__TITLE__", with: Self.escape(title))
            .replacingOccurrences(of: "__HEADLINE__", with: names)
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
    h1{font-size:1.3em;margin:0 0 .2em}#updated{color:#666;margin-bottom:1em}
    #headline{display:grid;grid-template-columns:repeat(auto-fill,minmax(210px,1fr));gap:12px;margin-bottom:1.5em}
    .figure{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px}
    .figure .name{color:#555;font-size:.85em;word-break:break-all}.figure .value{font-size:1.8em;font-weight:600}
    .figure svg{width:100%;height:40px;display:block}.figure polyline{fill:none;stroke:#2a6df4;stroke-width:1.5}
    table{border-collapse:collapse;background:#fff;width:100%}td{border-bottom:1px solid #eee;padding:3px 8px;font-family:ui-monospace,monospace;font-size:.9em}
    td.value{text-align:right}.error{color:#b00}
    </style></head><body>
    <h1>__TITLE__</h1><div id="updated">loading /metrics…</div>
    <div id="headline"></div><table id="samples"></table>
    <script>
    "use strict";
    const HEADLINE = [__HEADLINE__];
    const POINTS = 60, PERIOD_MS = 2000;
    const history = {}; let previous = null;
    function parse(text) {
      const samples = new Map(), types = {};
      for (const line of text.split("\n")) {
        if (line.startsWith("# TYPE ")) { const p = line.split(" "); types[p[2]] = p[3]; continue; }
        if (line === "" || line.startsWith("#")) continue;
        const cut = line.lastIndexOf(" ");
        samples.set(line.slice(0, cut), Number(line.slice(cut + 1)));
      }
      return { samples, types };
    }
    function cell(row, text, cls) { const td = row.insertCell(); td.textContent = text; if (cls) td.className = cls; return td; }
    function chart(points) {
      const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
      svg.setAttribute("viewBox", "0 0 " + (POINTS - 1) + " 40"); svg.setAttribute("preserveAspectRatio", "none");
      const max = Math.max(1, ...points), line = document.createElementNS(svg.namespaceURI, "polyline");
      line.setAttribute("points", points.map((v, i) => (i + POINTS - points.length) + "," + (38 - 36 * v / max)).join(" "));
      svg.appendChild(line); return svg;
    }
    function render(now, { samples, types }) {
      const head = document.getElementById("headline"); head.textContent = "";
      for (const name of HEADLINE) {
        if (!samples.has(name)) continue;
        const value = samples.get(name), counter = types[name] === "counter";
        const rate = counter && previous && previous.samples.has(name) ? Math.max(0, value - previous.samples.get(name)) * 1000 / (now - previous.at) : null;
        const series = history[name] = (history[name] || []).concat([counter ? (rate ?? 0) : value]).slice(-POINTS);
        const box = document.createElement("div"); box.className = "figure"; box.dataset.metric = name;
        const label = document.createElement("div"); label.className = "name"; label.textContent = name + (counter ? " (chart: per second)" : "");
        const figure = document.createElement("div"); figure.className = "value"; figure.textContent = String(value);
        box.append(label, figure, chart(series)); head.appendChild(box);
      }
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
