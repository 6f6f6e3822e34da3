"""CachedResolver (--resolve-dns) over a fake lookup: no test ever asks a real DNS server."""

from __future__ import annotations

from service.ingest.dns_cache import CachedResolver
from service.parse.records import NamedEndpoints


class FakeDns:
    def __init__(self, answers: dict[tuple[str, int], str]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, int]] = []

    def __call__(self, host: str, ip_version: int) -> str | None:
        self.asked.append((host, ip_version))
        return self.answers.get((host, ip_version))


def test_answers_and_failures_are_kept_for_their_time() -> None:
    dns = FakeDns({("a.example", 4): "192.0.2.1"})
    now = [0.0]
    resolver = CachedResolver(dns, ttl=600, negative_ttl=60, clock=lambda: now[0])
    assert resolver.address("a.example", 4) == "192.0.2.1"
    assert resolver.address("b.example", 4) is None
    now[0] = 59.0
    assert (resolver.address("a.example", 4), resolver.address("b.example", 4)) == (
        "192.0.2.1",
        None,
    )
    assert dns.asked == [("a.example", 4), ("b.example", 4)]
    now[0] = 61.0
    resolver.address("b.example", 4)
    now[0] = 601.0
    resolver.address("a.example", 4)
    assert dns.asked[2:] == [("b.example", 4), ("a.example", 4)]


def test_resolve_fills_only_the_ends_without_an_address() -> None:
    dns = FakeDns({("a.example", 6): "2001:db8::1", ("b.example", 6): "2001:db8::2"})
    resolver = CachedResolver(dns)
    link = NamedEndpoints("a.example", "b.example", "", "", 6)
    assert resolver.resolve(link) == link._replace(source="2001:db8::1", destination="2001:db8::2")
    given = NamedEndpoints("a.example", "198.51.100.1", "", "198.51.100.1", 6)
    assert resolver.resolve(given).destination == "198.51.100.1"
    assert dns.asked == [("a.example", 6), ("b.example", 6)]  # the second a.example was cached
    unknown = NamedEndpoints("c.example", "b.example", "", "", 6)
    assert resolver.resolve(unknown).source == ""


def test_the_cache_is_bounded() -> None:
    dns = FakeDns({})
    resolver = CachedResolver(dns, max_entries=2)
    for host in ("a", "b", "c", "a"):
        resolver.address(host, 0)
    assert len(dns.asked) == 4  # a was dropped when the cache filled
