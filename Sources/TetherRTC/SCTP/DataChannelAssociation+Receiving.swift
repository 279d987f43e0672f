import CTetherSCTP

extension DataChannelAssociation {
    /// On the queue: one message or piece of one, as usrsctp delivered it.
    func handleData(_ bytes: [UInt8], stream: UInt16, ppid: UInt32, isEndOfRecord: Bool) {
        guard socket != nil else { return }
        var partial = partialMessages.removeValue(forKey: stream) ?? PartialMessage(ppid: ppid)
        guard partial.ppid == ppid else { return fail(.protocolViolation(.interleavedMessage(stream: stream))) }
        guard partial.bytes.count + bytes.count <= configuration.maxMessageSize else {
            return fail(.protocolViolation(.messageTooLarge(limit: configuration.maxMessageSize)))
        }
        if partial.bytes.isEmpty { partial.bytes = bytes } else { partial.bytes += bytes }
        guard isEndOfRecord else {
            partialMessages[stream] = partial
            return
        }
        handleMessage(partial.bytes, stream: stream, ppid: ppid)
    }

    func handleMessage(_ message: [UInt8], stream: UInt16, ppid: UInt32) {
        guard let kind = DataChannelPPID(rawValue: ppid) else { return fail(.protocolViolation(.unexpectedPPID(ppid))) }
        if kind == .webRTCDCEP { return handleDCEP(message, stream: stream) }
        let (phase, channel) = shared.withLock { ($0.phase, $0.channelStream) }
        // A refused channel's messages may still be on their way; they, and anything on a stream
        // no channel was opened on, are dropped.
        guard stream == channel, phase == .open || phase == .closing else { return }
        switch kind {
        case .webRTCBinary: report(.message(message))
        case .webRTCBinaryEmpty: report(.message([]))
        case .webRTCString, .webRTCStringEmpty, .webRTCDCEP: fail(.protocolViolation(.unexpectedPPID(ppid)))
        }
    }

    func handleDCEP(_ bytes: [UInt8], stream: UInt16) {
        let channel = channelStream
        let message: DCEPMessage
        do {
            message = try DCEPMessage.decode(bytes)
        } catch {
            if stream == channel { return fail(.protocolViolation(.malformedDCEP(error))) }
            return refuse(stream, .malformed(error))
        }
        switch message {
        case .ack:
            guard configuration.opensChannel, stream == channel, !ackReceived else { return fail(.protocolViolation(.unexpectedDCEP)) }
            ackReceived = true
        case let .open(open):
            // On the open channel's own stream an OPEN is nonsense; once that stream is reset
            // both ways, the peer may reuse it, and is refused like any second channel.
            let isLive = phase == .open || phase == .closing
            guard stream != channel || !isLive else { return fail(.protocolViolation(.unexpectedDCEP)) }
            handleOpen(open, stream: stream)
        }
    }

    /// The side that does not open takes exactly one DATA_CHANNEL_OPEN, and only Tether's.
    func handleOpen(_ open: DCEPOpen, stream: UInt16) {
        let phase = phase
        guard !configuration.opensChannel, phase == .connecting || phase == .awaitingOpen else {
            return refuse(stream, .secondChannel(stream: stream))
        }
        guard configuration.isPeerStream(stream) else { return refuse(stream, .streamParity(stream: stream)) }
        guard open.channelType == .reliable else { return refuse(stream, .notReliableOrdered(open.channelType)) }
        guard open.label == DCEPOpen.cryptext.label else { return refuse(stream, .wrongLabel(open.label)) }
        guard open.protocol.isEmpty else { return refuse(stream, .unexpectedProtocol(open.protocol)) }
        shared.withLock {
            $0.phase = .open
            $0.channelStream = stream
        }
        enqueue(OutgoingMessage(stream: stream, ppid: .webRTCDCEP, payload: DCEPMessage.ack.encoded()))
        report(.channelOpen)
    }

    func refuse(_ stream: UInt16, _ refusal: DataChannelRefusal) {
        partialMessages[stream] = nil
        requestReset(stream)
        report(.peerChannelRefused(refusal))
    }

    /// On the queue: usrsctp's notifications.
    func handleNotice(_ notice: SCTPNotice) {
        guard socket != nil else { return }
        switch notice.type {
        case SCTPNotice.associationChange:
            switch Int32(notice.state) {
            case SCTP_COMM_UP: associationUp()
            case SCTP_COMM_LOST: fail(.associationLost)
            case SCTP_RESTART: fail(.associationRestarted)
            case SCTP_SHUTDOWN_COMP: fail(.shutDown)
            case SCTP_CANT_STR_ASSOC: fail(.cannotEstablish)
            default: break
            }
        case SCTPNotice.streamReset:
            handleStreamReset(notice)
        case SCTPNotice.sendFailed:
            // An abort reports its unsent messages first and the lost association after; the
            // association change, queued by then, is the better reason and goes first.
            queue.async { [self] in fail(.messageNotDelivered) }
        case SCTPNotice.partialDelivery:
            if notice.failure == UInt32(SCTP_PARTIAL_DELIVERY_ABORTED) { partialMessages[UInt16(truncatingIfNeeded: notice.stream)] = nil }
        case SCTPNotice.shutdown:
            fail(.shutDown)
        default:
            break
        }
    }

    /// The socket can read no more: the peer shut down or aborted.
    func handleEndOfStream() {
        fail(.shutDown)
    }

    func associationUp() {
        guard configuration.opensChannel else {
            shared.withLock { if $0.phase == .connecting { $0.phase = .awaitingOpen } }
            return
        }
        let stream = configuration.openingStream
        let opened = shared.withLock { shared -> Bool in
            guard shared.phase == .connecting else { return false }
            shared.phase = .open
            shared.channelStream = stream
            return true
        }
        guard opened else { return }
        enqueue(OutgoingMessage(stream: stream, ppid: .webRTCDCEP, payload: DCEPMessage.open(.cryptext).encoded()))
        report(.channelOpen)
    }

    /// The peer reset its outgoing direction of some streams (RFC 8831 §6.7): for the channel's
    /// stream that is the close, answered with this side's reset unless this side began.
    func handleStreamReset(_ notice: SCTPNotice) {
        let incoming = notice.flags & UInt16(SCTP_STREAM_RESET_INCOMING_SSN) != 0
        if incoming, let channel = channelStream, notice.resets(channel) {
            partialMessages[channel] = nil
            let closed = shared.withLock { shared -> Bool in
                guard shared.phase == .open || shared.phase == .closing else { return false }
                shared.phase = .closed
                shared.outbox = []
                shared.outboxBytes = 0
                return true
            }
            if closed {
                // Unless this side's own reset already went (it began, and its outbox drained).
                if !closeResetRequested {
                    closeResetRequested = true
                    requestReset(channel)
                }
                report(.channelClosed)
            }
        }
        flushResets()
    }
}
