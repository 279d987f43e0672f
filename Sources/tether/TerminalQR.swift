import CQRencode

/// The pairing link as a QR code a phone camera can scan: libqrencode makes the symbol (8-bit
/// mode, error correction M as the shipping Mac uses, client.md §2.6); it is drawn with half
/// blocks, two modules per character cell, inside the 4-module quiet zone scanners need.
enum TerminalQR {
    static let quietZone = 4

    /// The modules, row by row (true = dark); nil if the text does not fit a QR code.
    static func modules(_ text: String) -> [[Bool]]? {
        guard let code = QRcode_encodeString8bit(text, 0, QR_ECLEVEL_M) else { return nil }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        let data = code.pointee.data!
        return (0..<width).map { y in (0..<width).map { x in data[y * width + x] & 1 == 1 } }
    }

    /// Text lines: `█` both modules dark, `▀` upper, `▄` lower, space none. With `colors`, the
    /// symbol is drawn black on white whatever the terminal's own colours are.
    static func render(_ text: String, colors: Bool) -> [String]? {
        guard let symbol = modules(text) else { return nil }
        let size = symbol.count + 2 * quietZone
        func dark(_ x: Int, _ y: Int) -> Bool {
            let (mx, my) = (x - quietZone, y - quietZone)
            return mx >= 0 && my >= 0 && mx < symbol.count && my < symbol.count && symbol[my][mx]
        }
        var lines: [String] = []
        for y in stride(from: 0, to: size, by: 2) {
            var line = colors ? "\u{1B}[30;47m" : ""
            for x in 0..<size {
                switch (dark(x, y), y + 1 < size && dark(x, y + 1)) {
                case (true, true): line += "█"
                case (true, false): line += "▀"
                case (false, true): line += "▄"
                case (false, false): line += " "
                }
            }
            lines.append(line + (colors ? "\u{1B}[0m" : ""))
        }
        return lines
    }
}
