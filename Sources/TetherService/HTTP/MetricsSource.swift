/// Where the admin listener gets a scrape's exposition: a registry, or a service's own renderer
/// that answers later (the relay sums occupancy over every loop before it can render).
public struct MetricsSource: Sendable {
    /// Produces the exposition and passes it to the callback, once, from any thread.
    public let render: @Sendable (@escaping @Sendable (String) -> Void) -> Void

    /// A source that renders with `render`.
    public init(_ render: @escaping @Sendable (@escaping @Sendable (String) -> Void) -> Void) { self.render = render }

    /// A source that renders `registry` at once.
    public static func registry(_ registry: MetricsRegistry) -> MetricsSource {
        MetricsSource { done in done(registry.render()) }
    }
}
