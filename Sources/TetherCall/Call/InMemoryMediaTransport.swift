import Dispatch
import TetherNet
import TetherSync

/// A `CallMediaTransport` in memory: two ends on one `InMemoryMediaNetwork` behave like two
/// WebRTC peer connections with one reliable, ordered data channel, so machines and drivers run
/// whole calls without a network. The offerer's description carries a token
/// (`a=tether-inmemory:<token>`) that the answerer's `acceptOffer` finds its peer by. Each end
/// gathers one host candidate and the end of candidates; the data channel opens on both ends
/// once each has both descriptions and one of the other's candidates; messages arrive intact and
/// in order; `close` closes the channel under the peer. Everything runs on the network's queue,
/// and so do the reports.
///
/// Commands that WebRTC would refuse (a second offer, an answer that is not the peer's, a
/// candidate before the remote description, a message before the channel opened) report
/// `.failed`. Test hooks: `tamperNextMessage`, `simulateFailure`, `simulateChannelClose`.
public final class InMemoryMediaTransport: CallMediaTransport, @unchecked Sendable { // state only on the network's serial queue; the delegate under its lock
    let network: InMemoryMediaNetwork
    private struct WeakDelegate {
        weak var delegate: (any CallMediaTransportDelegate)?
    }

    private let storedDelegate = Locked(WeakDelegate())

    // Confined to the network's queue.
    var token: String?
    var isOfferer = false
    var hasLocalDescription = false
    var hasRemoteDescription = false
    var hasRemoteCandidate = false
    /// The answerer that took this end's offer, or the offerer whose offer this end took.
    weak var peer: InMemoryMediaTransport?
    var isOpen = false
    /// Closed or failed: nothing more happens and nothing more is reported.
    var isFinished = false
    var tamperNext = false

    init(network: InMemoryMediaNetwork) {
        self.network = network
    }

    /// Where reports go (the agent sets it before the first command).
    public var delegate: (any CallMediaTransportDelegate)? {
        get { storedDelegate.withLock { $0.delegate } }
        set { storedDelegate.withLock { $0.delegate = newValue } }
    }

    /// Carries out one command as a WebRTC peer connection would, in memory.
    public func perform(_ command: CallMediaCommand) {
        network.queue.async { self.run(command) }
    }

    /// The next message this end sends arrives with one bit flipped (in its last byte, where a
    /// secure-channel frame keeps its tag).
    public func tamperNextMessage() {
        network.queue.async { self.tamperNext = true }
    }

    /// ICE or DTLS fails on this end: it reports `.failed`, and the peer, if connected, sees its
    /// channel close.
    public func simulateFailure() {
        network.queue.async {
            guard !self.isFinished else { return }
            self.finish(reporting: .failed)
        }
    }

    /// The data channel closes under both ends: each reports `.channelClosed`.
    public func simulateChannelClose() {
        network.queue.async {
            // `finish` closes the peer's side too.
            guard self.isOpen else { return }
            self.finish(reporting: .channelClosed)
        }
    }

    func report(_ event: CallMediaEvent) {
        dispatchPrecondition(condition: .onQueue(network.queue))
        delegate?.mediaTransport(self, didReport: event)
    }

    /// Ends this end: the peer's channel closes if it was open, and `event` (if any) is this
    /// end's last report.
    func finish(reporting event: CallMediaEvent?) {
        let wasOpen = isOpen
        isFinished = true
        isOpen = false
        if let token, isOfferer { network.unregister(token: token) }
        if let event { report(event) }
        if wasOpen, let peer, peer.isOpen {
            peer.isOpen = false
            peer.isFinished = true
            peer.report(.channelClosed)
        }
    }
}
