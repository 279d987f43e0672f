/// One `<type>=<value>` line of a description, with its 1-based number for errors.
struct SDPLine {
    let number: Int
    let type: Character
    let value: Substring

    /// Splits a description into lines. RFC 8866 §5 ends lines with CRLF and asks parsers to
    /// accept a bare LF too, so either ends a line (aiortc and libwebrtc send CRLF); a final line
    /// without a terminator is taken as well, since signaling apps tend to trim. Every other
    /// control character, CR included, is refused, so nothing hides inside a value.
    static func split(_ text: String, maxBytes: Int, maxLines: Int) throws(DataChannelSDP.ParseError) -> [SDPLine] {
        let bytes = Array(text.utf8)
        guard bytes.count <= maxBytes else { throw .init(line: 0, .tooLarge) }
        var lines: [SDPLine] = []
        var start = 0
        while start < bytes.count {
            let number = lines.count + 1
            guard number <= maxLines else { throw .init(line: 0, .tooManyLines) }
            let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
            var contentEnd = end
            if end < bytes.count, contentEnd > start, bytes[contentEnd - 1] == 0x0D { contentEnd -= 1 }
            let content = bytes[start..<contentEnd]
            guard !content.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { throw .init(line: number, .controlCharacter) }
            guard content.count >= 3, (0x61...0x7A).contains(content[start]), content[start + 1] == UInt8(ascii: "=") else {
                throw .init(line: number, .malformedLine)
            }
            let line = String(decoding: content, as: UTF8.self)
            lines.append(SDPLine(number: number, type: Character(Unicode.Scalar(content[start])), value: line.dropFirst(2)))
            start = end + 1
        }
        return lines
    }
}
