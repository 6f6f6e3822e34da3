"""The canonical text of an IP address: the one form in which parsers, topology, link state and
snapshots compare link ends."""

from __future__ import annotations

import ipaddress
from functools import lru_cache


@lru_cache(maxsize=65536)
def canonical_ip(text: str) -> str | None:
    """The canonical text of the IP address `text`, or None when it is not one. An IPv4 address
    written as IPv6 (`::ffff:a.b.c.d`) is the IPv4 address; one with a scope id (`fe80::1%eth0`)
    names an interface of one host, not a link end, and is none.

    >>> canonical_ip("::FFFF:192.0.2.73"), canonical_ip("2001:DB8::1"), canonical_ip("fe80::1%eth0")
    ('192.0.2.73', '2001:db8::1', None)
    """
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id is not None:
            return None
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
    return str(address)
