"""Settings: the one reader of `NETTEL_*` environment variables; CLI flags override them.

`Settings` is `nettel serve`'s; another command's settings class (`nettel rucio-sync`:
`service.rucio.settings`) is a BaseSettings of its own prefix, loaded and named the same way
(`load_settings_of`, `setting_name`).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from service.errors import ConfigError

#: The bundle shipped with nettel: `models/bundle`, installed as the `models` package's data.
DEFAULT_BUNDLE = Path(__file__).resolve().parents[1] / "models" / "bundle"

DELAY_TOPIC = "/topic/perfsonar.raw.histogram-owdelay"
LOSS_TOPIC = "/topic/perfsonar.raw.packet-loss-rate"
THROUGHPUT_TOPIC = "/topic/perfsonar.raw.throughput"
RETRANSMITS_TOPIC = "/topic/perfsonar.raw.packet-retransmits"
TRACE_TOPIC = "/topic/perfsonar.raw.packet-trace"
#: The settings naming the subscribed topics (`service.runtime.topic_kinds`).
TOPIC_SETTINGS = (
    "delay_topic",
    "loss_topic",
    "throughput_topic",
    "retransmits_topic",
    "trace_topic",
)

Address = tuple[str, int]
#: Secrets are never taken from the command line, where `ps` would show them.
ENV_ONLY_SETTINGS = frozenset({"broker_password", "admin_token", "ingest_token", "warm_token"})
#: `--brokers none`: no bus; pScheduler runs over HTTP are the only input.
NO_BROKERS = "none"
#: The brokers' kind (`service.broker.flavour`); auto: from the broker's CONNECTED frame.
BrokerFlavour = Literal["auto", "activemq", "rabbitmq", "artemis"]
#: Which windows network alarms are raised over (`service.alarms`).
AlarmProfile = Literal["short", "aaas"]
#: What the empirical filter reads (`service.analysis.link_analysis.analyse_links`).
EmpiricalFilterInput = Literal["newest-minute", "netTel"]


#: A DNS name (labels of letters, digits, `-` and `_`, dot-separated, an optional final dot).
_HOST_NAME = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9_-]{1,63}(?<!-))*\.?$")


def parse_address(text: str) -> Address:
    """`host:port` (IPv6 hosts in brackets) -> (host, port); the host a DNS name or IP literal.

    >>> parse_address("[::1]:61613"), parse_address("mq.example.org:61613")
    (('::1', 61613), ('mq.example.org', 61613))
    """
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not host:port")
    if not _is_ip(host) and not _HOST_NAME.match(host):
        raise ValueError(
            f"{text!r} is not host:port: {host!r} is neither a host name nor an IP address "
            "(several host:port are separated by commas)"
        )
    return host, int(port)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def comma_separated(value: str) -> list[str]:
    """The items of a comma-separated setting (--brokers, --topology: a comma in a URL is
    written %2C), stripped, empty ones left out.

    >>> comma_separated("cric.json, https://psconfig.example.org/mesh.json,")
    ['cric.json', 'https://psconfig.example.org/mesh.json']
    """
    return [part.strip() for part in value.split(",") if part.strip()]


#: The shortest --retire-after: a link still holding data in its window is never retired.
RETIRE_AFTER_MINIMUM = 32 * 60
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_duration(text: str) -> float:
    """Seconds in `text`: a number of seconds or a number with a unit s, m, h, d or w.

    >>> parse_duration("7d"), parse_duration("90m"), parse_duration("3600")
    (604800.0, 5400.0, 3600.0)
    """
    text = text.strip().lower()
    scale = _DURATION_UNITS.get(text[-1:], 0)
    try:
        return float(text[:-1] if scale else text) * (scale or 1)
    except ValueError:
        raise ValueError(f"{text!r} is not a duration (e.g. 7d, 12h, 90m, 3600)") from None


class Settings(BaseSettings):
    """Everything `nettel serve` can be told, with defaults; env `NETTEL_<NAME>`."""

    model_config = SettingsConfigDict(env_prefix="NETTEL_", extra="forbid")

    listen: Annotated[Address, NoDecode] = Field(
        ("127.0.0.1", 8080), description="HTTP listen address host:port"
    )
    brokers: Annotated[tuple[Address, ...], NoDecode] = Field(
        (("127.0.0.1", 61613),),
        description="STOMP brokers host:port[,host:port...] (failover), or none: no bus, "
        "pScheduler runs over HTTP only (needs an ingest token; no telemetry, no ha_group)",
    )
    broker_user: str | None = Field(None, description="STOMP login")
    broker_password: SecretStr | None = Field(None, description="STOMP passcode")
    broker_password_file: Path | None = Field(None, description="file holding the STOMP passcode")
    broker_tls: bool = Field(
        False,
        description="connect to the brokers over TLS (an ActiveMQ stomp+ssl connector); the "
        "broker certificate must name the host as given in brokers",
    )
    broker_ca_file: Path | None = Field(
        None,
        description="PEM file of the CA certificates that sign the broker's certificate "
        "(unset: the system's trusted CAs); needs broker_tls",
    )
    broker_cert_file: Path | None = Field(
        None,
        description="PEM client certificate for brokers that require one; needs broker_tls "
        "and broker_key_file",
    )
    broker_key_file: Path | None = Field(
        None,
        description="PEM private key (unencrypted) of broker_cert_file; needs broker_tls and "
        "broker_cert_file",
    )
    broker_flavour: BrokerFlavour = Field(
        "auto",
        description="the brokers' kind, which decides what SUBSCRIBE carries (durable "
        "subscription, prefetch, ack mode): auto = from the server header of the broker's "
        "CONNECTED frame",
    )
    broker_vhost: str = Field(
        "/",
        min_length=1,
        max_length=255,
        description="virtual host, sent as the STOMP host header on CONNECT (RabbitMQ's vhost; "
        "ActiveMQ and Artemis ignore it)",
    )
    heartbeat_ms: int = Field(10_000, ge=0, le=600_000, description="STOMP heart-beat period (ms)")
    heartbeat_tolerance: float = Field(
        3.0,
        ge=1.5,
        le=60,
        description="heart-beat periods without a byte from the broker before its connection "
        "counts as lost; the CONNECT frame also promises the broker a beat only every "
        "heartbeat_ms x this (nettel still sends one every heartbeat_ms), so a process stalled "
        "for up to (tolerance - 1) periods (a busy machine, a long pause) keeps its connection",
    )
    delay_topic: str = Field(DELAY_TOPIC, min_length=1, description="histogram-owdelay topic")
    loss_topic: str = Field(LOSS_TOPIC, min_length=1, description="packet-loss-rate topic")
    throughput_topic: str = Field(
        THROUGHPUT_TOPIC, description="throughput topic (empty: not subscribed)"
    )
    retransmits_topic: str = Field(
        RETRANSMITS_TOPIC, description="packet-retransmits topic (empty: not subscribed)"
    )
    trace_topic: str = Field(TRACE_TOPIC, description="packet-trace topic (empty: not subscribed)")
    subscription: Literal["durable", "virtual", "plain"] = Field(
        "durable", description="durable topic subscription, virtual-topic queue, or plain topic"
    )
    client_id: str = Field(
        default_factory=lambda: f"nettel-{socket.gethostname()}",
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9._:-]+$",
        description="STOMP client-id and durable subscription (RabbitMQ: queue) name, one per "
        "replica: the broker refuses a second connection with the same one (default "
        "nettel-<host name>)",
    )
    prefetch: int = Field(
        1000,
        ge=1,
        le=100_000,
        description="broker prefetch (messages); ActiveMQ 5.17 duplicated and lost messages when "
        "durable subscribers drained a backlog with 5,000 or more",
    )
    parse_processes: int = Field(
        0,
        ge=0,
        le=64,
        description="child processes that parse incoming messages, off the GIL of the process "
        "that receives them (0: parse in the ingest thread, the fastest on 2 cores; children "
        "cost more CPU in all, for pipe and copies, and help only where cores are spare)",
    )
    state_dir: Path | None = Field(
        None, description="directory for state snapshots; unset = no persistence (auto acks)"
    )
    snapshot_interval: float = Field(
        60.0, gt=0, le=86_400, description="seconds between state snapshots"
    )
    interval: float = Field(
        10.0, gt=0, le=3600, description="longest time (s) between matrix recomputes"
    )
    freshness: float = Field(
        1.0, gt=0, le=3600, description="new data reaches the matrix within about this many s"
    )
    empirical_filter: EmpiricalFilterInput = Field(
        "newest-minute",
        description="what the delay-and-loss filter judges: the newest minute's delay and loss "
        "(reacts within a minute) or netTel's 15-minute smoothed delay and loss (netTel parity)",
    )
    topology: str | None = Field(
        None,
        description="which site each host is at: a file or an https:// URL (http:// only on "
        "loopback) holding YAML/JSON site -> [host or IP, ...], a CRIC rcsite export or "
        "PerfSonar service query, or a pSConfig document (layout told by content); several, "
        "comma-separated, are merged (e.g. CRIC's prefixes and a pSConfig mesh's addresses)",
    )
    topology_refresh: float = Field(
        21_600.0,
        ge=0,
        le=7 * 86_400,
        description="seconds between re-reads of topology (0: only at start and on SIGHUP)",
    )
    psconfig_site_key: str = Field(
        "display-name",
        min_length=1,
        max_length=128,
        description="key of a pSConfig address's _meta that names its site",
    )
    telemetry_topic: str = Field(
        "/topic/telemetry.perfsonar",
        min_length=1,
        description="destination for per-link results in netTel's layout",
    )
    publish_telemetry: bool = Field(True, description="publish changed links to telemetry_topic")
    alarm_topic: str = Field(
        "/topic/alarms.perfsonar",
        min_length=1,
        description="destination for network alarm events (one JSON document per alarm opened "
        "or closed), sent over the telemetry connection: only with publish_telemetry, and with "
        "ha_group only by the elected publisher",
    )
    ha_group: str | None = Field(
        None,
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="high-availability group: the replicas of one group elect one telemetry "
        "publisher through the broker (the single active consumer of queue nettel.ha.<group>); "
        "unset: this instance publishes on its own",
    )
    ha_lease_interval: float = Field(
        2.0, gt=0, le=60, description="seconds between the lease tokens each replica sends"
    )
    ha_lease_timeout: float = Field(
        6.0,
        gt=0,
        le=600,
        description="seconds without a lease token after which the publisher steps down, and "
        "that a new holder waits before it publishes (at least 2 x ha_lease_interval)",
    )
    stream_cost_step: float = Field(
        0.01, ge=0, le=1, description="cost change that makes /costmatrix/stream send a link"
    )
    rse_map: Path | None = Field(None, description="YAML/JSON file: Rucio RSE -> site name")
    metrics_top_site_pairs: int = Field(
        10,
        ge=0,
        le=1000,
        description="site pairs in nettel_link_cost on /metrics: the costliest ones, so the "
        "label set stays bounded (0: none)",
    )
    model: str = Field(
        "default",
        min_length=1,
        description="model bundle directory; 'default' = the shipped bundle, 'none' = no model",
    )
    admin_token: SecretStr | None = Field(
        None, description="bearer token for /admin endpoints (unset: admin endpoints disabled)"
    )
    admin_token_file: Path | None = Field(None, description="file holding the admin token")
    ingest_token: SecretStr | None = Field(
        None,
        description="token for PUT/POST /ingest/pscheduler: bearer, or the HTTP Basic password "
        "(unset: HTTP ingest disabled, 404)",
    )
    ingest_token_file: Path | None = Field(None, description="file holding the ingest token")
    ingest_client_rate: float = Field(
        50.0,
        gt=0,
        le=1_000_000,
        description="pScheduler results per second one client address may post (token bucket)",
    )
    ingest_client_burst: int = Field(
        500,
        ge=1,
        le=1_000_000,
        description="results one client address may post at once before its rate applies",
    )
    ingest_queue_bytes: int = Field(
        64 << 20,
        ge=2 << 20,
        le=16 << 30,
        description="received data waiting to be applied (bytes) beyond which /ingest/pscheduler "
        "answers 503 with Retry-After: ingest is behind",
    )
    resolve_dns: bool = Field(
        False,
        description="look up by DNS (cached) the host names of pScheduler runs' ends that the "
        "bus has not revealed",
    )
    max_links: int = Field(
        150_000,
        ge=1,
        le=10_000_000,
        description="directed links the state holds at most; a new link beyond is refused "
        '(nettel_rejected_total{reason="link_limit"}, alert NettelLinkLimit) until '
        "retirement frees rows (about 6 KiB of memory a link; WLCG has ~60k possible links)",
    )
    new_links_per_minute: int = Field(
        1_000,
        ge=1,
        le=10_000_000,
        description="new links one producer (a bus message's source host, or the HTTP client "
        "posting pScheduler runs) may add a minute; beyond, refused as new_link_rate until the "
        "minute has passed",
    )
    http_max_header_bytes: int = Field(
        64 << 10,
        ge=1 << 10,
        le=16 << 20,
        description="largest HTTP request line and headers (bytes); larger ones are answered "
        "431 and the connection closed",
    )
    http_header_timeout: float = Field(
        10.0,
        gt=0,
        le=600,
        description="seconds a connection may take to send a request's line and headers (from "
        "connect, or the request's first byte); slower ones are answered 408 and closed",
    )
    http_max_connections: int = Field(
        10_000,
        ge=16,
        le=1_000_000,
        description="open HTTP connections at most; one beyond is answered 503 and closed (the "
        "open-file limit is raised to fit, and this lowered when the limit cannot be)",
    )
    sse_max_streams: int = Field(
        256,
        ge=1,
        le=100_000,
        description="open /costmatrix/stream and /alarms/stream subscribers at most (both "
        "together); one more is answered 503",
    )
    trusted_proxies: str | None = Field(
        None,
        description="comma-separated addresses or networks of reverse proxies whose "
        "X-Forwarded-For and X-Forwarded-Proto name the client (e.g. HAProxy's address); unset: "
        "no forwarded header is believed, the client is the connection's peer",
    )
    backfill_from: str | None = Field(
        None,
        description="base URL of an esmond-compatible perfSONAR archive (esmond, elmond), e.g. "
        "https://ps-archive.example.org: at start, fill every archived link's window from it, "
        "and its all-time statistics from backfill_history (unset: no backfill)",
    )
    backfill_bound: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="longest time (s) the backfill runs and holds back readiness; links not "
        "read by then are left to live data",
    )
    backfill_timeout: float = Field(
        10.0, gt=0, le=600, description="timeout (s) of each archive request: connect, each read"
    )
    backfill_page_size: int = Field(
        10_000,
        ge=1,
        le=10_000,
        description="metadata objects or records per archive request; elmond answers at most "
        "10,000, a server with a lower cap needs this at most that cap",
    )
    backfill_concurrency: int = Field(8, ge=1, le=256, description="archive requests in flight")
    backfill_parse_processes: int = Field(
        1,
        ge=0,
        le=64,
        description="child processes that parse the archive's records while the backfill runs, "
        "ended after it (0: in the backfill thread); with --parse-processes N > 0 the bus's "
        "children parse them instead",
    )
    backfill_history: float = Field(
        1920.0,
        ge=1920,
        le=30 * 86_400,
        description="seconds of archive read per link: the last 32 minutes (1920 s) fill the "
        "window, any time before them goes into the all-time statistics (the backfill's time "
        "grows with it)",
    )
    warm_from: str | None = Field(
        None,
        description="at start, take the link state of a running peer (its http(s)://host:port "
        "base URL; GET /admin/state with warm_token) or the newest valid snapshot in a shared "
        "directory of replica state dirs (a path); on failure start from state_dir or empty",
    )
    warm_token: SecretStr | None = Field(None, description="the peer's admin token for warm_from")
    warm_token_file: Path | None = Field(None, description="file holding the warm_from token")
    warm_timeout: float = Field(
        30.0, gt=0, le=600, description="timeout (s) of the warm_from request: connect, each read"
    )
    warm_deadline: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="the whole warm_from (request, transfer, checks, decode) at most, in seconds; "
        "then the replica starts from its own state (HTTP serves meanwhile, /readyz says why "
        "it is not ready)",
    )
    retire_after: Annotated[float, NoDecode] = Field(
        7 * 86_400.0,
        ge=0,
        le=3650 * 86_400,
        allow_inf_nan=False,
        description="links without a datapoint for this long leave the state, the matrix and "
        "its views (seconds, or a duration such as 7d, 12h, 90m; at least 32m; 0: never)",
    )
    alarms: bool = Field(
        True,
        description="raise network alarms (loss, delay, clock, silent links, congestion) from "
        "the state each matrix cycle analyses; false: no alarm book, /alarms answers 503",
    )
    alarm_profile: AlarmProfile = Field(
        "short",
        description="which windows alarms are raised over: short (minutes, with hysteresis: "
        "alarm_open_minutes ...) or aaas (OSG Alarms and Alerts' own: each UTC day's loss and "
        "delay judged once, when the day has ended, against the 7 days before)",
    )
    alarm_open_minutes: int = Field(
        3,
        ge=1,
        le=1440,
        description="measured minutes in a row a loss, firewall or silent-link condition must "
        "hold before its alarm opens (short profile)",
    )
    alarm_delay_open_minutes: int = Field(
        5,
        ge=1,
        le=1440,
        description="measured minutes in a row a high one-way delay or a large clock correction "
        "must hold before its alarm opens (short profile)",
    )
    alarm_close_minutes: int = Field(
        5,
        ge=1,
        le=1440,
        description="clean measured minutes in a row before an alarm closes (short profile)",
    )
    alarm_congestion_probability: float = Field(
        0.9,
        gt=0,
        le=1,
        description="calibrated congestion probability at or above which a minute counts "
        "towards a sustained congestion alarm (short profile; needs a calibrated model)",
    )
    alarm_congestion_minutes: int = Field(
        10,
        ge=1,
        le=1440,
        description="minutes in a row the congestion probability must stay at or above "
        "alarm_congestion_probability before a sustained congestion alarm opens",
    )
    alarm_settle_seconds: float = Field(
        30.0,
        ge=0,
        le=1500,
        description="seconds after a minute ends before alarms judge it, so that every link's "
        "datapoints of that minute are in (a later datapoint of it is not judged)",
    )
    log_level: str = Field(
        "INFO", pattern="^(DEBUG|INFO|WARNING|ERROR)$", description="log level of the JSON logs"
    )

    @field_validator("listen", mode="before")
    @classmethod
    def _parse_listen(cls, value: object) -> object:
        return parse_address(value) if isinstance(value, str) else value

    @field_validator("brokers", mode="before")
    @classmethod
    def _parse_brokers(cls, value: object) -> object:
        if isinstance(value, str):
            if value.strip().lower() == NO_BROKERS:
                return ()
            return tuple(parse_address(part) for part in comma_separated(value))
        return value

    @field_validator("topology", mode="before")
    @classmethod
    def _check_topology(cls, value: object) -> object:
        if isinstance(value, Path):
            value = str(value)
        if not isinstance(value, str):
            return value
        sources = comma_separated(value)
        if not sources:
            raise ValueError("no file or URL given")
        for source in sources:
            _check_topology_source(source)
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _check_trusted_proxies(cls, value: str | None) -> str | None:
        if value is None:
            return None
        for part in comma_separated(value):
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ValueError(f"{part!r} is not an IP address or network") from None
        return ",".join(comma_separated(value)) or None

    @field_validator("retire_after", mode="before")
    @classmethod
    def _parse_retire_after(cls, value: object) -> object:
        seconds = parse_duration(value) if isinstance(value, str) else value
        if isinstance(seconds, int | float) and 0 < seconds < RETIRE_AFTER_MINIMUM:
            raise ValueError("at least 32m (the window), or 0 for never")
        return seconds

    @field_validator("warm_from")
    @classmethod
    def _check_warm_from(cls, value: str | None) -> str | None:
        if value is None:
            return None
        url = urlsplit(value)  # the value is not echoed: it might carry credentials
        if url.scheme not in ("http", "https"):
            if not Path(value).is_dir():
                raise ValueError("neither an http(s):// URL nor an existing directory")
        elif not url.hostname or url.query or url.fragment or url.username is not None:
            raise ValueError("not an http(s)://host[:port][/path] URL without credentials")
        return value

    @field_validator("backfill_from")
    @classmethod
    def _check_archive_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        url = urlsplit(value)  # the value is not echoed: it might carry credentials
        if url.scheme not in ("http", "https") or not url.hostname or url.query or url.fragment:
            raise ValueError("not an http(s)://host[:port][/path] URL")
        if url.username is not None:
            raise ValueError("credentials in the URL are not supported (archives read openly)")
        if url.port == 0:  # `port` raises ValueError above 65535
            raise ValueError("port 0")
        return value

    @model_validator(mode="after")
    def _check_files(self) -> Settings:
        files = ("broker_password_file", "admin_token_file", "ingest_token_file", "warm_token_file")
        for name in (*files, "rse_map"):
            path = getattr(self, name)
            if path is not None and not path.is_file():
                raise ValueError(f"{setting_name(name)}: file {path} does not exist")
        self._check_tls_files()
        if self.subscription == "virtual" and self.broker_flavour in ("rabbitmq", "artemis"):
            raise ValueError(
                f"{setting_name('subscription')} virtual (ActiveMQ virtual topics) needs ActiveMQ"
            )
        if not self.brokers:
            self._check_without_brokers()
        return self

    def _check_without_brokers(self) -> None:
        """--brokers none: runs come over HTTP only, and nothing may need a broker."""
        if self.ingest_bearer_token() is None:
            raise ValueError(
                f"{setting_name('brokers')} none leaves /ingest/pscheduler as the only input: "
                "set an ingest token (NETTEL_INGEST_TOKEN or --ingest-token-file)"
            )
        if self.ha_group is not None:
            raise ValueError(
                f"{setting_name('ha_group')} elects through the broker: it needs brokers"
            )

    @model_validator(mode="after")
    def _check_topics(self) -> Settings:
        seen: dict[str, str] = {}
        for name in TOPIC_SETTINGS:
            topic = getattr(self, name)
            if topic and topic in seen:
                raise ValueError(
                    f"{setting_name(name)} and {setting_name(seen[topic])} name the same topic "
                    f"{topic!r}: each event type needs its own"
                )
            seen[topic] = name
        return self

    @model_validator(mode="after")
    def _check_lease(self) -> Settings:
        if self.ha_lease_timeout < 2 * self.ha_lease_interval:
            raise ValueError(
                f"{setting_name('ha_lease_timeout')} must be at least 2 x "
                f"{setting_name('ha_lease_interval')}"
            )
        return self

    def _check_tls_files(self) -> None:
        files = {
            "broker_ca_file": self.broker_ca_file,
            "broker_cert_file": self.broker_cert_file,
            "broker_key_file": self.broker_key_file,
        }
        for name, path in files.items():
            if path is not None and not path.is_file():
                raise ValueError(f"{setting_name(name)}: file {path} does not exist")
            if path is not None and not self.broker_tls:
                raise ValueError(
                    f"{setting_name(name)} is set but {setting_name('broker_tls')} is off"
                )
        if (self.broker_cert_file is None) != (self.broker_key_file is None):
            raise ValueError(
                f"{setting_name('broker_cert_file')} and {setting_name('broker_key_file')} "
                "must be given together"
            )
        _check_pem_files(self.broker_ca_file, self.broker_cert_file, self.broker_key_file)

    def broker_passcode(self) -> str | None:
        """The passcode from the environment or the password file (file wins)."""
        return _secret(self.broker_password, self.broker_password_file)

    def admin_bearer_token(self) -> str | None:
        """The admin token from the environment or the token file (file wins); None = disabled."""
        return _secret(self.admin_token, self.admin_token_file) or None

    @property
    def telemetry_enabled(self) -> bool:
        """publish_telemetry, with a broker to publish to (not with --brokers none)."""
        return self.publish_telemetry and bool(self.brokers)

    def ingest_bearer_token(self) -> str | None:
        """The ingest token from the environment or the token file (file wins); None = disabled."""
        return _secret(self.ingest_token, self.ingest_token_file) or None

    def warm_bearer_token(self) -> str | None:
        """The peer's admin token for warm_from, from the environment or the file (file wins)."""
        return _secret(self.warm_token, self.warm_token_file) or None

    def model_path(self) -> Path | None:
        """The bundle directory to serve, or None when no model is wanted."""
        if self.model.lower() == "none":
            return None
        return DEFAULT_BUNDLE if self.model == "default" else Path(self.model)


def _check_pem_files(ca: Path | None, cert: Path | None, key: Path | None) -> None:
    """Load the TLS files once so a wrong file stops the start, not every connect attempt."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        if ca is not None:
            context.load_verify_locations(cafile=ca)
    except OSError:  # ssl.SSLError included
        raise ValueError(
            f"{setting_name('broker_ca_file')}: {ca} holds no PEM CA certificate"
        ) from None
    try:
        if cert is not None and key is not None:
            context.load_cert_chain(cert, key, password=lambda: b"")  # never prompt
    except OSError:
        raise ValueError(
            f"{setting_name('broker_cert_file')}, {setting_name('broker_key_file')}: {cert} and "
            f"{key} are not a matching PEM certificate and unencrypted private key"
        ) from None


def _check_topology_source(source: str) -> None:
    url = urlsplit(source)  # the value is not echoed: it may carry credentials
    if url.scheme not in ("http", "https"):
        if not Path(source).is_file():
            raise ValueError(f"file {source} does not exist")
    elif not url.hostname:
        raise ValueError("URL without a host")
    elif url.scheme == "http" and not _is_loopback(url.hostname):
        raise ValueError("an inventory URL must be https:// (http:// only on loopback)")


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _secret(value: SecretStr | None, path: Path | None) -> str | None:
    if path is not None:
        return path.read_text().strip()
    return value.get_secret_value() if value else None


def environment_variable(name: str, kind: type[BaseSettings] = Settings) -> str:
    """The environment variable of the setting `name` of the settings class `kind`.

    >>> environment_variable("retire_after")
    'NETTEL_RETIRE_AFTER'
    """
    return f"{kind.model_config.get('env_prefix', '')}{name}".upper()


def setting_name(name: str, kind: type[BaseSettings] = Settings) -> str:
    """How an operator gives the setting `name`: its flag and its environment variable.

    >>> setting_name("retire_after"), setting_name("admin_token")
    ('--retire-after / NETTEL_RETIRE_AFTER', 'NETTEL_ADMIN_TOKEN')
    """
    variable = environment_variable(name, kind)
    return variable if name in ENV_ONLY_SETTINGS else f"--{name.replace('_', '-')} / {variable}"


AnySettings = TypeVar("AnySettings", bound=BaseSettings)


def load_settings(**overrides: Any) -> Settings:
    """`nettel serve`'s settings: `load_settings_of(Settings, overrides)`."""
    return load_settings_of(Settings, overrides)


def load_settings_of(kind: type[AnySettings], overrides: Mapping[str, Any]) -> AnySettings:
    """`kind` from the environment with `overrides` (CLI flags, None: not given) on top;
    ConfigError if invalid, each problem named by the flag and environment variable that set it."""
    try:
        return kind(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as error:
        problems = "; ".join(_problem(kind, e["loc"], e["msg"]) for e in error.errors())
        raise ConfigError(f"invalid settings: {problems}") from None


def _problem(kind: type[BaseSettings], location: tuple[int | str, ...], message: str) -> str:
    message = message.removeprefix("Value error, ")
    if location and location[0] in kind.model_fields:
        return f"{setting_name(str(location[0]), kind)}: {message}"
    return message
