func runDemoCommand(_ arguments: [String]) async -> Never {
    fail("demo: not yet")
}
