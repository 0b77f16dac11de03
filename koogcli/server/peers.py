"""Who is at the other end of a loopback connection (SPEC §6: without a token, only the user
who runs koog serve is served).

Every local user can connect to 127.0.0.1, although the data dir is 0700: without a check,
the user `nobody` reads the sessions and memory of whoever runs the server and spends their
upstream key. On Linux the kernel answers who owns a given TCP socket: asked over netlink
(sock_diag, what `ss` uses) for the socket whose source is the request's client address
and whose destination is the server's, in a few microseconds; where netlink is refused,
its tables `/proc/net/tcp` and `tcp6` say the same, slowly (the kernel writes out every
socket: ~9 ms with 300 of them). Elsewhere (no such tables) this cannot be told, and
`owner` says so.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from collections.abc import Iterable
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))


def supported(tables: Iterable[Path] = TABLES) -> bool:
    """Whether this system lists sockets with their owners."""
    return any(t.exists() for t in tables)


def _word(four: bytes) -> str:
    (value,) = struct.unpack("<I", four)
    return f"{value:08X}"


def _forms(host: str) -> tuple[bytes | None, bytes]:
    """A host's address as an IPv4 socket would name it (None for an IPv6 address) and as
    an IPv6 one would (an IPv4 client of a dual-stack socket appears as ::ffff:a.b.c.d)."""
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if isinstance(address, ipaddress.IPv4Address):
        return address.packed, ipaddress.IPv6Address(f"::ffff:{address}").packed
    return None, address.packed


def _hex_forms(host: str, port: int) -> set[str]:
    """`ADDRESS:PORT` as the kernel's tables write it: each 32-bit word of the address in
    the machine's byte order (little-endian here), in the IPv4 table's form and the IPv6
    one's."""
    v4, v6 = _forms(host)
    forms = {"".join(_word(v6[i : i + 4]) for i in (0, 4, 8, 12))}
    if v4 is not None:
        forms.add(_word(v4))
    return {f"{f}:{port:04X}" for f in forms}


def owner(
    client: tuple[str, int], server: tuple[str, int], tables: Iterable[Path] = TABLES
) -> int | None:
    """The uid owning the client's end of the connection; None when it is not found
    (gone already, or neither netlink nor the tables answer)."""
    if tables is TABLES:
        try:
            return _asked(client, server)
        except OSError:
            pass  # netlink refused here: the tables
    return _listed(client, server, tables)


_SOCK_DIAG_BY_FAMILY = 20
_NLMSG_ERROR = 2
_NLM_F_REQUEST = 1
_NETLINK_SOCK_DIAG = 4
_ALL_STATES = 0xFFFFFFFF
_NO_COOKIE = 0xFFFFFFFF
_HEADER = struct.Struct("=IHHII")  # nlmsghdr
_REQUEST = struct.Struct("=BBBBI")  # inet_diag_req_v2 before its socket id
_UID_AT = _HEADER.size + 4 + 48 + 12  # inet_diag_msg: family..retrans, id, expires..wqueue


def _asked(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """sock_diag: one exact lookup of the client's socket, as an IPv4 socket and then as
    an IPv6 one (a client may reach 127.0.0.1 through either)."""
    (source4, source6), (target4, target6) = _forms(client[0]), _forms(server[0])
    tries: list[tuple[int, bytes, bytes]] = []
    if source4 is not None and target4 is not None:
        tries.append((socket.AF_INET, source4, target4))
    tries.append((socket.AF_INET6, source6, target6))
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as link:
        link.settimeout(1.0)
        for family, src, dst in tries:
            sockid = struct.pack(
                "!HH16s16s", client[1], server[1], src.ljust(16, b"\0"), dst.ljust(16, b"\0")
            ) + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)
            body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES) + sockid
            link.send(
                _HEADER.pack(_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0)
                + body
            )
            answer = link.recv(8192)
            kind = _HEADER.unpack_from(answer)[1]
            if kind == _SOCK_DIAG_BY_FAMILY and len(answer) >= _UID_AT + 4:
                return int(struct.unpack_from("=I", answer, _UID_AT)[0])
            if kind != _NLMSG_ERROR:
                raise OSError(f"unexpected netlink answer {kind}")
            # ENOENT: no such socket in this family; try the next
    return None


def _listed(client: tuple[str, int], server: tuple[str, int], tables: Iterable[Path]) -> int | None:
    local, remote = _hex_forms(*client), _hex_forms(*server)
    for table in tables:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 7 and fields[1] in local and fields[2] in remote:
                return int(fields[7])
    return None
