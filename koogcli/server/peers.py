"""Who is at the other end of a loopback connection (SPEC §6: without a token, only the user
who runs koog serve is served).

Every local user can connect to 127.0.0.1, although the data dir is 0700: without a check,
the user `nobody` reads the sessions and memory of whoever runs the server and spends their
upstream key. On Linux the kernel lists each TCP socket with its owner in `/proc/net/tcp`
and `/proc/net/tcp6`; the client's socket is the one whose local address is the request's
client address and whose remote address is the server's. Elsewhere (no such files) this
cannot be told, and `owner` says so.
"""

from __future__ import annotations

import ipaddress
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


def _hex_forms(host: str, port: int) -> set[str]:
    """`ADDRESS:PORT` as the kernel's tables write it: each 32-bit word of the address in
    the machine's byte order (little-endian here), in the IPv4 table's form and the IPv6
    one's (an IPv4 client of a dual-stack socket appears as ::ffff:a.b.c.d)."""
    address = ipaddress.ip_address(host.split("%", 1)[0])
    forms = set()
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if isinstance(address, ipaddress.IPv4Address):
        forms.add(_word(address.packed))
        address = ipaddress.IPv6Address(f"::ffff:{address}")
    packed = address.packed
    forms.add("".join(_word(packed[i : i + 4]) for i in (0, 4, 8, 12)))
    return {f"{f}:{port:04X}" for f in forms}


def owner(
    client: tuple[str, int], server: tuple[str, int], tables: Iterable[Path] = TABLES
) -> int | None:
    """The uid owning the client's end of the connection; None when it is not listed
    (gone already, or the tables cannot be read)."""
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
