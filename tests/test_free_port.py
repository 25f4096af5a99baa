"""``e2e.processes.free_port``: the ports the e2e servers are given (issue #21, item 21)."""

from __future__ import annotations

import socket

from e2e import processes


def test_free_port_never_hands_out_a_port_twice_nor_one_the_kernel_picks_for_connections() -> None:
    """``bind(0)`` ports come from the ephemeral range (outgoing connections take them too) and are
    free again once the probe closes, so two servers could be given one port, or lose it to a client."""
    low = processes._ephemeral_low()
    ports = [processes.free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert all(1024 <= p < low for p in ports)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # the twin: each one is bindable
        s.bind(("127.0.0.1", ports[-1]))
