"""One HTTP client for the development tools' requests to the local services they start.

`httpx.get` builds a client for each call, and with it a TLS context (the CA bundle read and
parsed): about 25 ms of CPU for a request that costs under 1 ms on a client kept for the
process. Polling a service ten times a second so cost a quarter of a core. Connections are not
kept alive: the services under test stop and start again on new ports, and a connection kept to
one that has gone would fail the next request instead of making a new one.
"""

from __future__ import annotations

import httpx

#: Shared by every thread of the process (httpx clients are thread-safe).
LOCAL_HTTP = httpx.Client(timeout=5.0, limits=httpx.Limits(max_keepalive_connections=0))
