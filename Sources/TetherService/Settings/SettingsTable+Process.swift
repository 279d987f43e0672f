import Foundation

extension SettingsTable {
    /// `load` with this process's environment and files: what a service's `main` calls.
    public func load(arguments: [String]) throws(SettingError) -> SettingValues {
        try load(arguments: arguments, environment: ProcessInfo.processInfo.environment, readFile: Self.readTextFile)
    }

    /// A UTF-8 file's text, or nil if it cannot be read.
    @Sendable public static func readTextFile(_ path: String) -> String? {
        try? String(contentsOfFile: path, encoding: .utf8)
    }
}
