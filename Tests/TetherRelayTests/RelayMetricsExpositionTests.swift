import TetherRelay
import XCTest

/// The whole exposition, byte for byte: the reference's dashboard and monitor parse it, so a
/// change of order, spacing or number format is a change of interface.
final class RelayMetricsExpositionTests: XCTestCase {
    func testAFreshRelayExposesExactlyThis() {
        XCTAssertEqual(RelayMetrics().render(occupancy: .init(), socketsLive: 0), Self.fresh)
    }

    func testABusyRelayExposesExactlyThis() {
        let metrics = RelayMetrics()
        for _ in 0..<3 { metrics.httpRequest() }
        metrics.httpError()
        metrics.processException()
        for _ in 0..<2 { metrics.upgradeAccepted() }
        metrics.upgradeRejected(.room_cap)
        metrics.upgradeRejected(.gate)
        metrics.gateRefused(status: 403)
        metrics.upgradeRejected(.misdirected)
        metrics.upgradeRejected(.gate)
        metrics.gateRefused(status: 400)
        metrics.keepaliveTermination()
        metrics.closed(code: 1008, reason: "daily quota exceeded")
        metrics.closed(code: 1008, reason: "mac offline")
        metrics.pushFailed()
        for end: RelayMetrics.SocketEnd in [.relay(reason: "reshard relay-2.example.com"), .relay(reason: "reshard"), .relay(reason: "peer gone"),
                                            .relay(reason: "not one of ours"), .client, .keepaliveTimeout, .connectionLost, .protocolError] {
            metrics.socketEnded(end)
        }
        for ms: UInt64 in [0, 250, 1_000, 1_001, 59_999, 86_400_000] { metrics.socketLifetime(.milliseconds(ms)) }
        var occupancy = RelayMetrics.Occupancy()
        (occupancy.rooms, occupancy.both, occupancy.macOnly, occupancy.phoneOnly, occupancy.neither) = (7, 2, 3, 0, 2)
        (occupancy.pendingSockets, occupancy.parkedSockets, occupancy.splicedSockets) = (2, 3, 4)
        XCTAssertEqual(metrics.render(occupancy: occupancy, socketsLive: 9), Self.busy)
        XCTAssertEqual(metrics.pushBody(timestamp: .milliseconds(1_700_000_000_000), roomsLive: 7, socketsLive: 9), Self.busyPush)
    }
}

extension RelayMetricsExpositionTests {
    static let fresh = #"""
    # HELP relay_quota_exceeded_total Sockets closed because a room quota was exceeded.
    # TYPE relay_quota_exceeded_total counter
    relay_quota_exceeded_total 0
    # HELP relay_phone_no_mac_total Phone sockets closed because no mac was admitted.
    # TYPE relay_phone_no_mac_total counter
    relay_phone_no_mac_total 0
    # HELP relay_ws_keepalive_terminated_total WebSockets terminated for not answering a keepalive ping.
    # TYPE relay_ws_keepalive_terminated_total counter
    relay_ws_keepalive_terminated_total 0
    # HELP relay_metrics_push_errors_total Failed outbound metrics pushes.
    # TYPE relay_metrics_push_errors_total counter
    relay_metrics_push_errors_total 0
    # HELP relay_process_exceptions_total Internal faults survived by the process (a failing store is counted in relay_storage_errors_total instead).
    # TYPE relay_process_exceptions_total counter
    relay_process_exceptions_total 0
    # HELP relay_rooms_live Resident rooms.
    # TYPE relay_rooms_live gauge
    relay_rooms_live 0
    # HELP relay_sockets_live Open accepted WebSockets.
    # TYPE relay_sockets_live gauge
    relay_sockets_live 0
    # HELP relay_rooms_both Resident rooms with an admitted mac and phone.
    # TYPE relay_rooms_both gauge
    relay_rooms_both 0
    # HELP relay_rooms_mac_only Resident rooms with only an admitted mac.
    # TYPE relay_rooms_mac_only gauge
    relay_rooms_mac_only 0
    # HELP relay_rooms_phone_only Resident rooms with only an admitted phone.
    # TYPE relay_rooms_phone_only gauge
    relay_rooms_phone_only 0
    # HELP relay_rooms_neither Resident rooms with no admitted socket.
    # TYPE relay_rooms_neither gauge
    relay_rooms_neither 0
    # HELP relay_socket_lifetime_seconds Lifetime of accepted WebSockets.
    # TYPE relay_socket_lifetime_seconds histogram
    relay_socket_lifetime_seconds_bucket{le="1"} 0
    relay_socket_lifetime_seconds_bucket{le="5"} 0
    relay_socket_lifetime_seconds_bucket{le="15"} 0
    relay_socket_lifetime_seconds_bucket{le="60"} 0
    relay_socket_lifetime_seconds_bucket{le="300"} 0
    relay_socket_lifetime_seconds_bucket{le="1800"} 0
    relay_socket_lifetime_seconds_bucket{le="+Inf"} 0
    relay_socket_lifetime_seconds_sum 0.0
    relay_socket_lifetime_seconds_count 0
    # HELP relay_storage_errors_total Store calls that failed (database down, disk full); each refused what needed it.
    # TYPE relay_storage_errors_total counter
    relay_storage_errors_total 0
    # HELP relay_storage_available 1 while the store answers, 0 from a failed call until one succeeds.
    # TYPE relay_storage_available gauge
    relay_storage_available 1
    # HELP relay_shard_map_version Version of the shard map this node serves (0: none published, it owns every bucket).
    # TYPE relay_shard_map_version gauge
    relay_shard_map_version 0
    # HELP relay_sockets_by_state Open accepted WebSockets by state: pending (not yet admitted), parked (admitted, peer absent), spliced (admitted with its peer).
    # TYPE relay_sockets_by_state gauge
    relay_sockets_by_state{state="parked"} 0
    relay_sockets_by_state{state="pending"} 0
    relay_sockets_by_state{state="spliced"} 0
    # HELP relay_room_gate_refused_total Upgrades the room gate refused (counted in reason="gate" too), by cause: origin (403, an Origin header) or bad_room (400).
    # TYPE relay_room_gate_refused_total counter
    relay_room_gate_refused_total{cause="bad_room"} 0
    relay_room_gate_refused_total{cause="origin"} 0
    # HELP relay_sockets_closed_total Accepted WebSockets closed, by reason: the relay's own close reason (peer_gone, displaced, write_stalled, mac_offline, reshard, ...), or client_closed, connection_lost, keepalive_timeout, protocol_error.
    # TYPE relay_sockets_closed_total counter
    relay_sockets_closed_total{reason="admission_timeout"} 0
    relay_sockets_closed_total{reason="bad_hello"} 0
    relay_sockets_closed_total{reason="bad_proof"} 0
    relay_sockets_closed_total{reason="bad_signature"} 0
    relay_sockets_closed_total{reason="bad_ticket"} 0
    relay_sockets_closed_total{reason="client_closed"} 0
    relay_sockets_closed_total{reason="connection_lost"} 0
    relay_sockets_closed_total{reason="daily_quota_exceeded"} 0
    relay_sockets_closed_total{reason="displaced"} 0
    relay_sockets_closed_total{reason="frame_rate_exceeded"} 0
    relay_sockets_closed_total{reason="frame_too_large"} 0
    relay_sockets_closed_total{reason="internal_error"} 0
    relay_sockets_closed_total{reason="keepalive_timeout"} 0
    relay_sockets_closed_total{reason="mac_offline"} 0
    relay_sockets_closed_total{reason="other"} 0
    relay_sockets_closed_total{reason="pairing_cycle_cap"} 0
    relay_sockets_closed_total{reason="peer_gone"} 0
    relay_sockets_closed_total{reason="protocol_error"} 0
    relay_sockets_closed_total{reason="rate_limited"} 0
    relay_sockets_closed_total{reason="reshard"} 0
    relay_sockets_closed_total{reason="room_deleted"} 0
    relay_sockets_closed_total{reason="server_shutting_down"} 0
    relay_sockets_closed_total{reason="signature_required"} 0
    relay_sockets_closed_total{reason="slot_occupied"} 0
    relay_sockets_closed_total{reason="ticket_required"} 0
    relay_sockets_closed_total{reason="too_many_pending"} 0
    relay_sockets_closed_total{reason="write_stalled"} 0

    """#

    static let busy = #"""
    # HELP relay_quota_exceeded_total Sockets closed because a room quota was exceeded.
    # TYPE relay_quota_exceeded_total counter
    relay_quota_exceeded_total 1
    # HELP relay_phone_no_mac_total Phone sockets closed because no mac was admitted.
    # TYPE relay_phone_no_mac_total counter
    relay_phone_no_mac_total 1
    # HELP relay_ws_keepalive_terminated_total WebSockets terminated for not answering a keepalive ping.
    # TYPE relay_ws_keepalive_terminated_total counter
    relay_ws_keepalive_terminated_total 1
    # HELP relay_metrics_push_errors_total Failed outbound metrics pushes.
    # TYPE relay_metrics_push_errors_total counter
    relay_metrics_push_errors_total 1
    # HELP relay_process_exceptions_total Internal faults survived by the process (a failing store is counted in relay_storage_errors_total instead).
    # TYPE relay_process_exceptions_total counter
    relay_process_exceptions_total 1
    # HELP relay_http_requests_total HTTP requests that passed the gate.
    # TYPE relay_http_requests_total counter
    relay_http_requests_total 3
    # HELP relay_ws_upgrades_total Accepted WebSocket upgrades.
    # TYPE relay_ws_upgrades_total counter
    relay_ws_upgrades_total 2
    # HELP relay_http_errors_total HTTP requests answered 500.
    # TYPE relay_http_errors_total counter
    relay_http_errors_total 1
    # HELP relay_ws_upgrades_rejected_total Refused WebSocket upgrades by reason.
    # TYPE relay_ws_upgrades_rejected_total counter
    relay_ws_upgrades_rejected_total{reason="gate"} 2
    relay_ws_upgrades_rejected_total{reason="misdirected"} 1
    relay_ws_upgrades_rejected_total{reason="room_cap"} 1
    # HELP relay_rooms_live Resident rooms.
    # TYPE relay_rooms_live gauge
    relay_rooms_live 7
    # HELP relay_sockets_live Open accepted WebSockets.
    # TYPE relay_sockets_live gauge
    relay_sockets_live 9
    # HELP relay_rooms_both Resident rooms with an admitted mac and phone.
    # TYPE relay_rooms_both gauge
    relay_rooms_both 2
    # HELP relay_rooms_mac_only Resident rooms with only an admitted mac.
    # TYPE relay_rooms_mac_only gauge
    relay_rooms_mac_only 3
    # HELP relay_rooms_phone_only Resident rooms with only an admitted phone.
    # TYPE relay_rooms_phone_only gauge
    relay_rooms_phone_only 0
    # HELP relay_rooms_neither Resident rooms with no admitted socket.
    # TYPE relay_rooms_neither gauge
    relay_rooms_neither 2
    # HELP relay_socket_lifetime_seconds Lifetime of accepted WebSockets.
    # TYPE relay_socket_lifetime_seconds histogram
    relay_socket_lifetime_seconds_bucket{le="1"} 3
    relay_socket_lifetime_seconds_bucket{le="5"} 4
    relay_socket_lifetime_seconds_bucket{le="15"} 4
    relay_socket_lifetime_seconds_bucket{le="60"} 5
    relay_socket_lifetime_seconds_bucket{le="300"} 5
    relay_socket_lifetime_seconds_bucket{le="1800"} 5
    relay_socket_lifetime_seconds_bucket{le="+Inf"} 6
    relay_socket_lifetime_seconds_sum 86462.25
    relay_socket_lifetime_seconds_count 6
    # HELP relay_storage_errors_total Store calls that failed (database down, disk full); each refused what needed it.
    # TYPE relay_storage_errors_total counter
    relay_storage_errors_total 0
    # HELP relay_storage_available 1 while the store answers, 0 from a failed call until one succeeds.
    # TYPE relay_storage_available gauge
    relay_storage_available 1
    # HELP relay_shard_map_version Version of the shard map this node serves (0: none published, it owns every bucket).
    # TYPE relay_shard_map_version gauge
    relay_shard_map_version 0
    # HELP relay_sockets_by_state Open accepted WebSockets by state: pending (not yet admitted), parked (admitted, peer absent), spliced (admitted with its peer).
    # TYPE relay_sockets_by_state gauge
    relay_sockets_by_state{state="parked"} 3
    relay_sockets_by_state{state="pending"} 2
    relay_sockets_by_state{state="spliced"} 4
    # HELP relay_room_gate_refused_total Upgrades the room gate refused (counted in reason="gate" too), by cause: origin (403, an Origin header) or bad_room (400).
    # TYPE relay_room_gate_refused_total counter
    relay_room_gate_refused_total{cause="bad_room"} 1
    relay_room_gate_refused_total{cause="origin"} 1
    # HELP relay_sockets_closed_total Accepted WebSockets closed, by reason: the relay's own close reason (peer_gone, displaced, write_stalled, mac_offline, reshard, ...), or client_closed, connection_lost, keepalive_timeout, protocol_error.
    # TYPE relay_sockets_closed_total counter
    relay_sockets_closed_total{reason="admission_timeout"} 0
    relay_sockets_closed_total{reason="bad_hello"} 0
    relay_sockets_closed_total{reason="bad_proof"} 0
    relay_sockets_closed_total{reason="bad_signature"} 0
    relay_sockets_closed_total{reason="bad_ticket"} 0
    relay_sockets_closed_total{reason="client_closed"} 1
    relay_sockets_closed_total{reason="connection_lost"} 1
    relay_sockets_closed_total{reason="daily_quota_exceeded"} 0
    relay_sockets_closed_total{reason="displaced"} 0
    relay_sockets_closed_total{reason="frame_rate_exceeded"} 0
    relay_sockets_closed_total{reason="frame_too_large"} 0
    relay_sockets_closed_total{reason="internal_error"} 0
    relay_sockets_closed_total{reason="keepalive_timeout"} 1
    relay_sockets_closed_total{reason="mac_offline"} 0
    relay_sockets_closed_total{reason="other"} 1
    relay_sockets_closed_total{reason="pairing_cycle_cap"} 0
    relay_sockets_closed_total{reason="peer_gone"} 1
    relay_sockets_closed_total{reason="protocol_error"} 1
    relay_sockets_closed_total{reason="rate_limited"} 0
    relay_sockets_closed_total{reason="reshard"} 2
    relay_sockets_closed_total{reason="room_deleted"} 0
    relay_sockets_closed_total{reason="server_shutting_down"} 0
    relay_sockets_closed_total{reason="signature_required"} 0
    relay_sockets_closed_total{reason="slot_occupied"} 0
    relay_sockets_closed_total{reason="ticket_required"} 0
    relay_sockets_closed_total{reason="too_many_pending"} 0
    relay_sockets_closed_total{reason="write_stalled"} 0

    """#

    static let busyPush = #"{"ts":1700000000000,"ws_upgrades_total":2,"ws_upgrades_rejected_total":4,"http_requests_total":3,"http_errors_total":1,"process_exceptions_total":1,"quota_exceeded_total":1,"rooms_live":7,"sockets_live":9}"#
}
