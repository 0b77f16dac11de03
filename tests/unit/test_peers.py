"""server/peers.py: the owner of a loopback connection's client socket, read from the
kernel's socket tables (a real connection, and tables written as Linux writes them)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from koogcli.server import peers

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"


def test_a_real_connection_is_owned_by_this_process_user() -> None:
    """Asked over netlink (sock_diag) and read from /proc/net/tcp: the same owner."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = listening.accept()
            with accepted:
                found = peers.owner(client.getsockname(), ("127.0.0.1", port))
                listed = peers.owner(client.getsockname(), ("127.0.0.1", port), list(peers.TABLES))
    assert found == listed == os.geteuid()  # netlink's answer, and the tables' (the fallback)


def test_tables_as_linux_writes_them(tmp_path: Path) -> None:
    tcp, tcp6 = tmp_path / "tcp", tmp_path / "tcp6"
    # 127.0.0.1:41000 -> 127.0.0.1:8765 owned by 65534; the server's own end by 0.
    tcp.write_text(
        HEADER
        + "   0: 0100007F:A028 0100007F:223D 01 00000000:00000000 00:00000000 00000000 65534 0\n"
        + "   1: 0100007F:223D 0100007F:A028 01 00000000:00000000 00:00000000 00000000     0 0\n"
    )
    # [::1]:41001 -> [::1]:8765 owned by 1000.
    tcp6.write_text(
        HEADER
        + "   0: 00000000000000000000000001000000:A029 00000000000000000000000001000000:223D"
        + " 01 00000000:00000000 00:00000000 00000000  1000 0\n"
    )
    tables = (tcp, tcp6)
    assert peers.owner(("127.0.0.1", 41000), ("127.0.0.1", 8765), tables) == 65534
    assert peers.owner(("::1", 41001), ("::1", 8765), tables) == 1000
    assert peers.owner(("::ffff:127.0.0.1", 41000), ("::ffff:127.0.0.1", 8765), tables) == 65534
    assert peers.owner(("127.0.0.1", 41002), ("127.0.0.1", 8765), tables) is None
    assert peers.supported(tables) and not peers.supported([tmp_path / "absent"])


def test_where_socket_owners_cannot_be_told_a_token_is_required_unless_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SPEC §6: "elsewhere a token by default"."""
    from koogcli.config.schema import ServeSettings, ServeToken
    from koogcli.server import guard

    assert guard.who_is_served(ServeSettings()) == "owner"  # Linux, as here
    assert guard.who_is_served(ServeSettings(require_token=True)) == "kept-token"
    monkeypatch.setattr(peers, "supported", lambda tables=peers.TABLES: False)
    assert guard.who_is_served(ServeSettings()) == "kept-token"
    assert guard.who_is_served(ServeSettings(require_token=False)) == "everyone"
    configured = ServeSettings(tokens=[ServeToken(token="t" * 20)], require_token=True)
    assert guard.who_is_served(configured) == "tokens"
