"""What the OpenAPI document says of the ALTO resources, which FastAPI cannot infer from them.

The routes (`alto.py`) read POST bodies raw and write every reply and error by hand, to keep RFC
7285's media types exact; so their request bodies, path parameter and statuses are described
here and passed as `responses=` and `openapi_extra=`. The schemas are the checks of
`request_bodies` written as JSON schema: a body valid against them is one the server accepts.
Two rules no JSON schema can state are in the descriptions: a filtered cost map's cost metric is
the one of its path, and the endpoint cost service's limit is on the number of (source,
destination) pairs (the schema bounds each list by its square root, so any two valid lists are
within it; longer lists are accepted while the pairs of their distinct entries stay within it).

>>> import re
>>> [bool(re.fullmatch(IPV6_ENDPOINT_PATTERN, f"ipv6:{text}")) for text in (
...     "2001:DB8::1", "::", "::ffff:192.0.2.1", "1:2:3:4:5:6:7:8", "1::2::3", "fe80::1%eth0")]
[True, True, True, True, False, False]
>>> [bool(re.fullmatch(IPV4_ENDPOINT_PATTERN, f"ipv4:{text}")) for text in (
...     "192.0.2.255", "0.0.0.0", "192.0.2.256", "192.0.2.01", "192.0.2")]
[True, True, False, False, False]
"""

from __future__ import annotations

import math
from typing import Any

from service.publish.alto.pids import PID_PATTERN
from service.publish.alto.protocol import (
    COST_MAP_FILTER_MEDIA,
    COST_MAP_MEDIA,
    DIRECTORY_MEDIA,
    E_INVALID_FIELD_TYPE,
    E_INVALID_FIELD_VALUE,
    E_MISSING_FIELD,
    E_SYNTAX,
    ENDPOINT_COST_MEDIA,
    ENDPOINT_COST_PARAMS_MEDIA,
    ERROR_MEDIA,
    EVENT_STREAM_MEDIA,
    NETWORK_MAP_MEDIA,
    UPDATE_STREAM_PARAMS_MEDIA,
)
from service.publish.alto.request_bodies import COST_MODE, MAX_ENDPOINT_PAIRS, MAX_SUBSTREAMS
from service.publish.alto.view import METRICS

Schema = dict[str, Any]
Responses = dict[int | str, dict[str, Any]]

#: Each endpoint list's bound in the schema: two lists within it never exceed the pair limit.
MAX_LISTED_ENDPOINTS = math.isqrt(MAX_ENDPOINT_PAIRS)

_HEXTET = "[0-9A-Fa-f]{1,4}"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
#: Every text form of an IPv6 address (RFC 4291 section 2.2): eight groups, `::` standing for
#: one or more zero groups, the last 32 bits as a dotted quad; no zone (`%eth0`).
_IPV6 = "|".join(
    [
        rf"(?:{_HEXTET}:){{7}}{_HEXTET}",
        rf"(?:{_HEXTET}:){{1,7}}:",
        *(rf"(?:{_HEXTET}:){{1,{7 - n}}}(?::{_HEXTET}){{1,{n}}}" for n in range(1, 7)),
        rf":(?:(?::{_HEXTET}){{1,7}}|:)",
        rf"(?:{_HEXTET}:){{6}}{_DOTTED_QUAD}",
        rf"::(?:{_HEXTET}:){{0,5}}{_DOTTED_QUAD}",
        *(rf"(?:{_HEXTET}:){{{n}}}:(?:{_HEXTET}:){{0,{5 - n}}}{_DOTTED_QUAD}" for n in range(1, 6)),
    ]
)
#: The typed endpoint addresses `request_bodies.parse_typed_address` accepts (section 10.4).
IPV4_ENDPOINT_PATTERN = f"^ipv4:{_DOTTED_QUAD}$"
IPV6_ENDPOINT_PATTERN = f"^ipv6:(?:{_IPV6})$"

ERROR_SCHEMA: Schema = {
    "title": "ALTO error (RFC 7285 section 8.5)",
    "type": "object",
    "required": ["meta"],
    "properties": {
        "meta": {
            "type": "object",
            "required": ["code"],
            "properties": {
                "code": {
                    "type": "string",
                    "enum": [
                        E_SYNTAX,
                        E_MISSING_FIELD,
                        E_INVALID_FIELD_TYPE,
                        E_INVALID_FIELD_VALUE,
                    ],
                },
                "field": {
                    "type": "string",
                    "description": "the field at fault, nested ones by their path "
                    "(`cost-type/cost-metric`), or the header (`Accept`, `Content-Type`)",
                },
                "value": {"description": "what the request held there (any JSON value)"},
                "syntax-error": {"type": "string", "description": "for E_SYNTAX: what is wrong"},
            },
        }
    },
}

_PID: Schema = {"type": "string", "pattern": PID_PATTERN, "description": "a PID name"}
_TYPED_ADDRESS: Schema = {
    "description": "a typed endpoint address: `ipv4:192.0.2.1`, `ipv6:2001:db8::1`",
    "anyOf": [
        {"type": "string", "pattern": IPV4_ENDPOINT_PATTERN},
        {"type": "string", "pattern": IPV6_ENDPOINT_PATTERN},
    ],
}
_VTAG: Schema = {
    "type": "object",
    "required": ["resource-id", "tag"],
    "properties": {"resource-id": {"type": "string"}, "tag": {"type": "string"}},
}
_COST_TYPE: Schema = {
    "type": "object",
    "required": ["cost-mode", "cost-metric"],
    "properties": {
        "cost-mode": {"type": "string", "enum": [COST_MODE]},
        "cost-metric": {"type": "string", "enum": list(METRICS)},
    },
}
_NO_CONSTRAINTS: Schema = {
    "type": "array",
    "maxItems": 0,
    "description": "cost constraints are not offered (`cost-constraints` false): none or empty",
}


def _costs(keys: Schema) -> Schema:
    """Source -> destination -> numerical cost, sources and destinations named by `keys`."""
    row = {"type": "object", "propertyNames": keys, "additionalProperties": {"type": "number"}}
    return {"type": "object", "propertyNames": keys, "additionalProperties": row}


def _lists(
    items: Schema, what: str, max_items: int | None = None, dsts_required: bool = False
) -> Schema:
    """An object of `srcs` and `dsts` lists; `dsts_required`: present with at least one item."""
    listed: Schema = {"type": "array", "items": items}
    if max_items is not None:
        listed["maxItems"] = max_items
    dsts = listed | {"minItems": 1} if dsts_required else listed
    return {
        "type": "object",
        "properties": {"srcs": listed | {"description": f"source {what}"}}
        | {"dsts": dsts | {"description": f"destination {what}"}},
    } | ({"required": ["dsts"]} if dsts_required else {})


_DOCUMENTS: dict[str, Schema] = {
    DIRECTORY_MEDIA: {
        "type": "object",
        "required": ["meta", "resources"],
        "properties": {
            "meta": {"type": "object"},
            "resources": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["uri", "media-type"],
                    "properties": {"uri": {"type": "string"}, "media-type": {"type": "string"}},
                },
            },
        },
    },
    NETWORK_MAP_MEDIA: {
        "type": "object",
        "required": ["meta", "network-map"],
        "properties": {
            "meta": {"type": "object", "required": ["vtag"], "properties": {"vtag": _VTAG}},
            "network-map": {
                "type": "object",
                "propertyNames": _PID,
                "additionalProperties": {
                    "type": "object",
                    "properties": {
                        "ipv4": {"type": "array", "items": {"type": "string"}},
                        "ipv6": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
        },
    },
    COST_MAP_MEDIA: {
        "type": "object",
        "required": ["meta", "cost-map"],
        "properties": {
            "meta": {
                "type": "object",
                "required": ["dependent-vtags", "cost-type"],
                "properties": {
                    "dependent-vtags": {"type": "array", "items": _VTAG},
                    "cost-type": _COST_TYPE,
                },
            },
            "cost-map": _costs(_PID),
        },
    },
    ENDPOINT_COST_MEDIA: {
        "type": "object",
        "required": ["meta", "endpoint-cost-map"],
        "properties": {
            "meta": {
                "type": "object",
                "required": ["cost-type", "vtag"],
                "properties": {"cost-type": _COST_TYPE, "vtag": _VTAG},
            },
            "endpoint-cost-map": _costs(_TYPED_ADDRESS),
        },
    },
}

_REQUESTS: dict[str, Schema] = {
    COST_MAP_FILTER_MEDIA: {
        "title": "ReqFilteredCostMap (RFC 7285 section 11.3.2.3)",
        "type": "object",
        "required": ["cost-type"],
        "properties": {
            "cost-type": _COST_TYPE
            | {"description": "numerical, of the cost map's own metric (the one in the path)"},
            "constraints": _NO_CONSTRAINTS,
            "pids": _lists(_PID, "PIDs; absent or empty: every PID")
            | {"description": "a PID the map does not have is ignored"},
        },
    },
    ENDPOINT_COST_PARAMS_MEDIA: {
        "title": "ReqEndpointCostMap (RFC 7285 section 11.5.1.3)",
        "type": "object",
        "required": ["cost-type", "endpoints"],
        "properties": {
            "cost-type": _COST_TYPE,
            "constraints": _NO_CONSTRAINTS,
            "endpoints": _lists(
                _TYPED_ADDRESS,
                "addresses (sources empty or absent: the client's address)",
                MAX_LISTED_ENDPOINTS,
                dsts_required=True,
            )
            | {
                "description": f"at most {MAX_ENDPOINT_PAIRS:,} (source, destination) pairs of "
                "distinct entries (an entry listed twice counts once)"
            },
        },
    },
}

_REQUESTS[UPDATE_STREAM_PARAMS_MEDIA] = {
    "title": "UpdateStreamReq (RFC 8895 sections 6.5 and 7.4)",
    "type": "object",
    "properties": {
        "add": {
            "type": "object",
            "maxProperties": MAX_SUBSTREAMS,
            "propertyNames": _PID | {"description": "a client-id (the syntax of a PID name)"},
            "additionalProperties": {
                "title": "AddUpdateReq",
                "type": "object",
                "required": ["resource-id"],
                "properties": {
                    "resource-id": {
                        "type": "string",
                        "description": "a resource of the directory (`GET /alto`) that the "
                        "update stream `uses`",
                    },
                    "tag": {"type": "string", "description": "the network map version held"},
                    "incremental-changes": {"type": "boolean", "default": True},
                    "input": {
                        "type": "object",
                        "description": "the POST body of a filtered cost map or of the "
                        "endpoint cost service (required for them, refused for the others)",
                    },
                },
            },
            "description": "substreams to start (on a new stream: at least one)",
        },
        "remove": {
            "type": "array",
            "items": {"type": "string"},
            "description": "client-ids of substreams to stop (stream control only)",
        },
    },
}

_EXAMPLES: dict[str, Any] = {
    COST_MAP_FILTER_MEDIA: {
        "cost-type": {"cost-mode": COST_MODE, "cost-metric": "delay-ow"},
        "pids": {"srcs": ["CERN"], "dsts": []},
    },
    ENDPOINT_COST_PARAMS_MEDIA: {
        "cost-type": {"cost-mode": COST_MODE, "cost-metric": "delay-ow"},
        "endpoints": {
            "srcs": ["ipv4:192.0.2.1"],
            "dsts": ["ipv4:198.51.100.20", "ipv6:2001:db8::1"],
        },
    },
    UPDATE_STREAM_PARAMS_MEDIA: {
        "add": {
            "sites": {"resource-id": "networkmap"},
            "delays": {"resource-id": "costmap-delay-ow"},
        }
    },
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {ERROR_MEDIA: {"schema": ERROR_SCHEMA}}}


_NOT_ACCEPTABLE = _error("E_INVALID_FIELD_VALUE (`Accept`): `Accept` rules the reply's type out")
_NO_MATRIX = {
    "description": "no cost matrix computed yet (FastAPI's error, as on every route of the matrix)",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["detail"],
                "properties": {"detail": {"type": "string"}},
            }
        }
    },
}
_UNOFFERED_METRIC = _error("E_INVALID_FIELD_VALUE (`cost-metric`): a metric nettel does not offer")
_BAD_REQUEST = _error(
    "the body is not JSON or not an object (E_SYNTAX), a field is missing (E_MISSING_FIELD), "
    "of the wrong JSON type (E_INVALID_FIELD_TYPE) or of a value not offered "
    "(E_INVALID_FIELD_VALUE); a malformed PID name or typed address (E_SYNTAX)"
)
_TOO_LARGE = _error("E_SYNTAX: a body over 1 MiB")
_WRONG_MEDIA = _error("E_INVALID_FIELD_VALUE (`Content-Type`): a body of another media type")


_NO_STREAM = _error("E_INVALID_FIELD_VALUE (`control-uri`): no open stream has this control URI")
_STREAM_LIMIT = {
    "description": "too many update streams open, or the service is stopping (FastAPI's "
    "error; `Retry-After` says when to try again)",
    "content": _NO_MATRIX["content"],
}
_BODY_REFUSED: Responses = {
    400: _error(
        "the body is not JSON or not an object (E_SYNTAX), a field is missing (E_MISSING_FIELD), "
        "of the wrong JSON type (E_INVALID_FIELD_TYPE) or of a value not offered "
        "(E_INVALID_FIELD_VALUE: an unknown resource-id, a client-id already in use or not on "
        "the stream, an `input` its resource refuses, named as `add/<client-id>/input/...`)"
    ),
    413: _TOO_LARGE,
    415: _WRONG_MEDIA,
}
UPDATE_STREAM_RESPONSES: Responses = {
    **_BODY_REFUSED,
    200: {
        "description": "server-sent events (RFC 8895 section 6.7): control updates (event "
        "`application/alto-updatestreamcontrol+json`, first the `control-uri`) and data "
        "updates (event `<media type>,<client-id>`: a full document, then "
        "`application/merge-patch+json` patches)",
        "content": {EVENT_STREAM_MEDIA: {"schema": {"type": "string"}}},
    },
    406: _NOT_ACCEPTABLE,
    503: _STREAM_LIMIT,
}
STREAM_CONTROL_RESPONSES: Responses = {
    **_BODY_REFUSED,
    204: {"description": "done: the stream announces the substreams started and stopped"},
    404: _NO_STREAM,
}


def get_responses(media_type: str, *, matrix: bool = True, metric: bool = False) -> Responses:
    """The statuses of a GET resource replying `media_type`: 200, 406, (`metric`) 404 for a
    metric not offered, (`matrix`) 503 before the first matrix."""
    responses: Responses = {
        200: {
            "description": media_type,
            "content": {media_type: {"schema": _DOCUMENTS[media_type]}},
        },
        406: _NOT_ACCEPTABLE,
    }
    if metric:
        responses[404] = _UNOFFERED_METRIC
    if matrix:
        responses[503] = _NO_MATRIX
    return dict(sorted(responses.items(), key=lambda item: str(item[0])))


def post_responses(media_type: str, *, metric: bool = False) -> Responses:
    """The statuses of a POST resource replying `media_type`: those of `get_responses`, and the
    refusals of its body (400, 413, 415)."""
    responses = get_responses(media_type, metric=metric)
    responses |= {400: _BAD_REQUEST, 413: _TOO_LARGE, 415: _WRONG_MEDIA}
    return dict(sorted(responses.items(), key=lambda item: str(item[0])))


def request_body_schema(media_type: str) -> dict[str, Any]:
    """`openapi_extra` for a POST resource taking `media_type` (the only type it accepts)."""
    content = {"schema": _REQUESTS[media_type], "example": _EXAMPLES[media_type]}
    return {"requestBody": {"required": True, "content": {media_type: content}}}


#: `openapi_extra` of the cost map resources' path parameter, read by `alto.offered_metric`.
METRIC_PARAMETER: dict[str, Any] = {
    "parameters": [
        {
            "name": "metric",
            "in": "path",
            "required": True,
            "description": "the cost metric (any other answers 404)",
            "schema": {"type": "string", "enum": list(METRICS)},
        }
    ]
}
