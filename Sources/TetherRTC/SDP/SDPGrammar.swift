/// The ABNF pieces of RFC 8866 and RFC 8839 the SDP parsers share, over UTF-8 bytes.
enum SDPGrammar {
    /// `ice-char = ALPHA / DIGIT / "+" / "/"` (RFC 8839 §5.1): the alphabet of foundations,
    /// ufrags, passwords and ice-options tags.
    static func isICEChar(_ byte: UInt8) -> Bool {
        isAlpha(byte) || isDigit(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/")
    }

    static func isICEString(_ text: Substring, length: ClosedRange<Int>) -> Bool {
        length.contains(text.utf8.count) && text.utf8.allSatisfy(isICEChar)
    }

    /// `token` of RFC 8866 §9: printable ASCII without space and the separators
    /// `"`, `(`, `)`, `,`, `/`, `:`, `;`, `<`, `=`, `>`, `?`, `@`, `[`, `\`, `]`, `{`, `}`.
    static func isToken(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case 0x21, 0x23...0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x30...0x39, 0x41...0x5A, 0x5E...0x7E: true
            default: false
            }
        }
    }

    /// `VCHAR` runs (RFC 5234): visible ASCII, what an unknown extension value may hold.
    static func isVisible(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// `1*<maxDigits>DIGIT` as a number of type `T`; nil when empty, too long, not digits or out
    /// of `T`'s range.
    static func number<T: FixedWidthInteger & UnsignedInteger>(_ text: Substring, maxDigits: Int, as _: T.Type = T.self) -> T? {
        guard (1...maxDigits).contains(text.utf8.count) else { return nil }
        var value: T = 0
        for byte in text.utf8 {
            guard isDigit(byte) else { return nil }
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = shifted.addingReportingOverflow(T(byte - UInt8(ascii: "0")))
            guard !overflow, !carry else { return nil }
            value = sum
        }
        return value
    }

    /// A port (`1*5DIGIT`, 0 to 65535).
    static func port(_ text: Substring) -> UInt16? { number(text, maxDigits: 5) }

    /// The text split at every single space; nil when two spaces meet or one leads or trails,
    /// which no grammar here allows.
    static func fields(_ text: Substring) -> [Substring]? {
        let fields = text.split(separator: " ", omittingEmptySubsequences: false)
        return fields.contains(where: \.isEmpty) ? nil : fields
    }

    static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
    static func isAlpha(_ byte: UInt8) -> Bool { (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) }
}
