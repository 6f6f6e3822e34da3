"""Every way nettel refuses input or configuration, in one place.

Exception tree::

    NettelError
    ├── ConfigError          invalid settings or files given by the operator
    ├── ModelBundleError     a model bundle that cannot be served (missing, corrupt, mismatched)
    └── RejectedInput        a message or datapoint refused; carries a RejectReason
"""

from __future__ import annotations

from enum import StrEnum


class RejectReason(StrEnum):
    """Named reasons for refusing a message or datapoint; the label set of the reject metric."""

    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_FIELD = "missing_field"
    BAD_VALUE = "bad_value"
    UNKNOWN_TOPIC = "unknown_topic"
    TOO_LARGE = "too_large"
    TOO_MANY_DATAPOINTS = "too_many_datapoints"
    EMPTY = "empty"
    TOO_OLD = "too_old"
    FUTURE = "future"
    CLOCK_ERROR = "clock_error"
    LOSS_OUT_OF_RANGE = "loss_out_of_range"
    #: A throughput below 0 or above `service.parse.throughput.MAX_THROUGHPUT_BPS`.
    THROUGHPUT_OUT_OF_RANGE = "throughput_out_of_range"
    #: A traceroute with a hop beyond `service.parse.packet_trace.MAX_HOPS` (the path state's
    #: width).
    TOO_MANY_HOPS = "too_many_hops"
    #: A traceroute refused: its new hop addresses do not fit the path state's address table.
    HOP_TABLE_FULL = "hop_table_full"
    #: A new link refused: the state holds --max-links links already.
    LINK_LIMIT = "link_limit"
    #: A new link refused: its producer added --new-links-per-minute links within the minute.
    NEW_LINK_RATE = "new_link_rate"
    #: A message's host name refused (its datapoints are kept): the name is bound to another
    #: address (by the topology or an earlier message), or the row has another name already.
    IDENTITY_CONFLICT = "identity_conflict"
    #: Refusals of an HTTP ingest request (/ingest/pscheduler) before its body is queued.
    UNAUTHORIZED = "unauthorized"
    RATE_LIMITED = "rate_limited"
    QUEUE_FULL = "queue_full"


class NettelError(Exception):
    """Base of all nettel errors."""


class ConfigError(NettelError):
    """Operator-supplied settings or files are invalid; the message says what to fix."""


class RejectedInput(NettelError):
    """Input refused for a named reason; `detail` is for the log, never for metrics labels."""

    def __init__(self, reason: RejectReason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason
        self.detail = detail


class ModelBundleError(NettelError):
    """A model bundle is missing, corrupt, or does not match the service's features."""
