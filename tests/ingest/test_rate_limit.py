"""ClientRateLimiter: a token bucket per client address, with bounded memory."""

from __future__ import annotations

import pytest

from service.ingest.rate_limit import ClientRateLimiter


def test_each_client_has_its_own_bucket_refilled_at_the_rate() -> None:
    now = [0.0]
    limiter = ClientRateLimiter(rate=10.0, burst=5, clock=lambda: now[0])
    assert [limiter.admit("a") for _ in range(5)] == [0.0] * 5
    assert limiter.admit("a") == pytest.approx(0.1)
    assert limiter.admit("b") == 0.0  # another client is not held back
    now[0] = 0.25  # 2.5 tokens back
    assert [limiter.admit("a") for _ in range(3)] == [0.0, 0.0, pytest.approx(0.05)]
    now[0] = 100.0  # a long pause refills to the burst, no more
    assert sum(limiter.admit("a") == 0.0 for _ in range(10)) == 5


def test_beyond_max_clients_the_least_recent_is_forgotten() -> None:
    limiter = ClientRateLimiter(rate=1.0, burst=1, max_clients=2, clock=lambda: 0.0)
    assert [limiter.admit(c) for c in ("a", "b")] == [0.0, 0.0]
    assert limiter.admit("a") == 1.0  # a is now the most recent
    limiter.admit("c")  # b is forgotten
    assert limiter.admit("b") == 0.0  # and now a, the least recent, is forgotten
    assert limiter.admit("c") == 1.0 and limiter.admit("a") == 0.0


def test_rate_and_burst_must_make_sense() -> None:
    with pytest.raises(ValueError):
        ClientRateLimiter(rate=0.0, burst=1)
    with pytest.raises(ValueError):
        ClientRateLimiter(rate=1.0, burst=0)
