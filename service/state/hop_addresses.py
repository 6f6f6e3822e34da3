"""The addresses traceroute hops answered from, each stored once for every path that holds it.

Paths of a mesh share most of their routers, so a path stores each hop as a number into this
table, which holds the address text and the AS it was last reported in. The table is bounded
(`MAX_ADDRESSES`); the path state compacts it to the addresses its paths still hold when it
fills up and when links retire.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: The most distinct hop addresses held: a quarter million (some 40 MB of text and lookup at
#: most). WLCG's meshes cross some tens of thousands of router interfaces.
MAX_ADDRESSES = 1 << 18


class HopAddresses:
    """Address text <-> number, with each address's AS number (0: unknown)."""

    def __init__(self, addresses: Sequence[str] = (), asns: np.ndarray | None = None) -> None:
        self.addresses: list[str] = list(addresses)
        self.numbers = {address: number for number, address in enumerate(self.addresses)}
        self.asns = np.zeros(len(self.addresses), np.uint32) if asns is None else asns.copy()

    def __len__(self) -> int:
        return len(self.addresses)

    def room_for(self, count: int) -> bool:
        return len(self.addresses) + count <= MAX_ADDRESSES

    def number_of(self, address: str, asn: int) -> int | None:
        """The number of `address` (added if new; None when the table is full); a non-zero
        `asn` becomes its AS."""
        number = self.numbers.get(address)
        if number is None:
            if len(self.addresses) >= MAX_ADDRESSES:
                return None
            number = len(self.addresses)
            self.numbers[address] = number
            self.addresses.append(address)
            if number >= len(self.asns):
                self.asns = np.concatenate([self.asns, np.zeros(max(number, 64), np.uint32)])
        if asn:
            self.asns[number] = asn
        return number

    def keep(self, referenced: np.ndarray) -> np.ndarray:
        """Keep only the `referenced` numbers (ascending), renumbered in their order; returns
        old number -> new number (-1: dropped), for the paths to renumber their hops."""
        renumber = np.full(len(self.addresses) + 1, -1, np.int32)  # the extra maps -1 to -1
        renumber[referenced] = np.arange(len(referenced), dtype=np.int32)
        self.addresses = [self.addresses[number] for number in referenced.tolist()]
        self.numbers = {address: number for number, address in enumerate(self.addresses)}
        self.asns = self.asns[referenced].copy()
        return renumber

    def asn_array(self) -> np.ndarray:
        """The AS number of each address, in number order."""
        return self.asns[: len(self.addresses)]
