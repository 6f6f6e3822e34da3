"""What the HTTP side needs of the running service, as an interface publish owns.

The composition root (`service.runtime.Runtime`) is one implementation; publish never imports
it, so data and imports run one way: the runtime builds the publishers, and the routes, the app
and its lifespans see the runtime only through `ServedService`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry

from service.analysis.predictor import ModelInfo
from service.broker.election import BrokerElection
from service.ingest.pscheduler_http import PschedulerIntake
from service.ingest.source import Source
from service.matrix.cycle import MatrixCycle
from service.publish.publishers import Publishers
from service.state.link_state import LinkState


class ServedService(Protocol):
    """The parts routes read, and what a lifespan asks of the whole service."""

    state: LinkState
    cycle: MatrixCycle
    publishers: Publishers
    registry: CollectorRegistry
    #: Every input of the service.
    sources: tuple[Source, ...]
    election: BrokerElection | None
    #: The /admin bearer token (None: admin endpoints disabled).
    admin_token: str | None
    #: Called when a part started after the warm start fails to start.
    on_start_failure: Callable[[BaseException], object] | None

    @property
    def intake(self) -> PschedulerIntake | None:
        """/ingest/pscheduler's intake (its token None: the endpoint is disabled)."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def ready(self) -> tuple[bool, list[str]]:
        """Whether the service is ready, and if not, why not."""
        ...

    def reload_model(self) -> ModelInfo:
        """Load the model bundle again (ModelBundleError keeps the one in service)."""
        ...

    def reload(self) -> None:
        """SIGHUP: re-read what can change under a running service; never raises."""
        ...
