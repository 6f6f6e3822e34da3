"""Content negotiation of the response's coding: does the client's Accept-Encoding take gzip?"""

from __future__ import annotations


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether `accept_encoding` (RFC 9110 section 12.5.3) takes gzip: listed, or covered by `*`,
    with a weight above 0. `x-gzip` is gzip's alias; a malformed weight counts as 0.

    >>> accepts_gzip("gzip, deflate"), accepts_gzip("gzip;q=0"), accepts_gzip("br;q=1, *;q=0.5")
    (True, False, True)
    >>> accepts_gzip("*;q=0.3, gzip;q=0"), accepts_gzip("identity"), accepts_gzip("GZIP; Q=0.001")
    (False, False, True)
    """
    weights: dict[str, float] = {}
    for element in accept_encoding.split(","):
        coding, _, parameters = element.partition(";")
        coding = coding.strip().lower()
        if coding:
            weights[coding] = _weight(parameters)
    for name in ("gzip", "x-gzip", "*"):
        if name in weights:
            return weights[name] > 0
    return False


def _weight(parameters: str) -> float:
    """The q parameter of one Accept-Encoding element (1 when absent, 0 when malformed)."""
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                weight = float(value.strip())
            except ValueError:
                return 0.0
            return weight if 0.0 <= weight <= 1.0 else 0.0
    return 1.0
