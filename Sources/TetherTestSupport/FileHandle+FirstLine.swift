public import Foundation

extension FileHandle {
    /// Reads byte by byte up to and including the first newline (or end of file), so nothing a
    /// child process writes after its start-up line is consumed.
    public func readFirstLine() -> String {
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = readData(ofLength: 1)
            if chunk.isEmpty { break }
            line += chunk
        }
        return String(decoding: line, as: UTF8.self)
    }
}
