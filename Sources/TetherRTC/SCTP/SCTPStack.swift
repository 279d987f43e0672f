import CTetherSCTP

/// The process-wide usrsctp, brought up once by the first association and never finished
/// (usrsctp_finish is only safe once no socket exists, which a library cannot know).
///
/// It runs `usrsctp_init_nothreads` plus one timer thread of our own (in CTetherSCTP) rather than
/// `usrsctp_init`: the latter also opens raw IPv4/IPv6 SCTP sockets whenever the process may (as
/// root) and feeds every SCTP packet reaching the host into the stack from two more threads. The
/// process therefore gains two threads for good, usrsctp's iterator and the timer, and no file
/// descriptor. ECN, ASCONF and AUTH are switched off (nothing to use them for inside DTLS).
///
/// usrsctp is entered by one thread at a time (CTetherSCTP holds one lock around every call and
/// the timer tick: its own locking does not survive concurrent entry). It calls back on the timer
/// thread, or on whichever thread is inside a usrsctp call, with that lock held; every callback
/// below copies what it was given and hops to the association's queue, so no association code
/// runs inside usrsctp and nothing re-enters it.
enum SCTPStack {
    static func start() {
        tether_sctp_start(sctpOutput, sctpData, sctpNotice, sctpWritable)
    }
}

private func sctpOutput(_ id: tether_sctp_id, _ packet: UnsafeRawPointer?, _ length: Int) {
    guard let packet else { return }
    let bytes = [UInt8](UnsafeRawBufferPointer(start: packet, count: length))
    SCTPRegistry.hop(id) { $0.deliverPacket(bytes) }
}

private func sctpData(_ id: tether_sctp_id, _ data: UnsafeRawPointer?, _ length: Int, _ stream: UInt16, _ ppid: UInt32, _ flags: Int32) {
    guard let data else {
        SCTPRegistry.hop(id) { $0.handleEndOfStream() }
        return
    }
    let bytes = [UInt8](UnsafeRawBufferPointer(start: data, count: length))
    let isEndOfRecord = flags & Int32(MSG_EOR) != 0
    SCTPRegistry.hop(id) { $0.handleData(bytes, stream: stream, ppid: ppid, isEndOfRecord: isEndOfRecord) }
}

private func sctpNotice(_ id: tether_sctp_id, _ notice: UnsafePointer<tether_sctp_notice>?) {
    guard let notice = notice?.pointee else { return }
    let streams = notice.streams.map { Array(UnsafeBufferPointer(start: $0, count: Int(notice.stream_count))) } ?? []
    let copy = SCTPNotice(type: notice.type, flags: notice.flags, state: notice.state, failure: notice.failure,
                          stream: notice.stream, streams: streams)
    SCTPRegistry.hop(id) { $0.handleNotice(copy) }
}

private func sctpWritable(_ id: tether_sctp_id) {
    SCTPRegistry.hop(id) { $0.flushOutbox() }
}
