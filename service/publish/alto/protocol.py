"""What RFC 7285 fixes for every ALTO exchange: media types (with RFC 8895's for update
streams), errors, content negotiation.

An error (section 8.5) is an `application/alto-error+json` document `{"meta": {"code": ...}}`
with, where they help, `field` (a nested field named by its path: `cost-type/cost-metric`),
`value` (what the request held there) and, for `E_SYNTAX`, `syntax-error` (what went wrong).
"""

from __future__ import annotations

from typing import Any

DIRECTORY_MEDIA = "application/alto-directory+json"
NETWORK_MAP_MEDIA = "application/alto-networkmap+json"
COST_MAP_MEDIA = "application/alto-costmap+json"
COST_MAP_FILTER_MEDIA = "application/alto-costmapfilter+json"
ENDPOINT_COST_MEDIA = "application/alto-endpointcost+json"
ENDPOINT_COST_PARAMS_MEDIA = "application/alto-endpointcostparams+json"
ERROR_MEDIA = "application/alto-error+json"
UPDATE_STREAM_PARAMS_MEDIA = "application/alto-updatestreamparams+json"
UPDATE_STREAM_CONTROL_MEDIA = "application/alto-updatestreamcontrol+json"
MERGE_PATCH_MEDIA = "application/merge-patch+json"
EVENT_STREAM_MEDIA = "text/event-stream"

E_SYNTAX = "E_SYNTAX"
E_MISSING_FIELD = "E_MISSING_FIELD"
E_INVALID_FIELD_TYPE = "E_INVALID_FIELD_TYPE"
E_INVALID_FIELD_VALUE = "E_INVALID_FIELD_VALUE"


class AltoError(Exception):
    """A refused request: the ALTO error document and the HTTP status it is sent with."""

    def __init__(
        self,
        code: str,
        field: str | None = None,
        value: Any = None,
        *,
        status: int = 400,
        syntax_error: str | None = None,
    ) -> None:
        super().__init__(code, field, value, syntax_error)
        self.code, self.field, self.value = code, field, value
        self.status, self.syntax_error = status, syntax_error

    def document(self) -> dict[str, Any]:
        """
        >>> AltoError(E_MISSING_FIELD, "cost-type").document()
        {'meta': {'code': 'E_MISSING_FIELD', 'field': 'cost-type'}}
        """
        meta: dict[str, Any] = {"code": self.code}
        if self.field is not None:
            meta["field"] = self.field
        if self.value is not None:
            meta["value"] = self.value
        if self.syntax_error is not None:
            meta["syntax-error"] = self.syntax_error
        return {"meta": meta}


def bare_media_type(content_type: str | None) -> str:
    """The media type without parameters, lower-cased ("" when there is none).

    >>> bare_media_type("Application/ALTO-EndpointCostParams+JSON; charset=UTF-8")
    'application/alto-endpointcostparams+json'
    """
    return (content_type or "").split(";")[0].strip().lower()


def accepts(accept: str | None, media_type: str) -> bool:
    """Whether an `Accept` header admits `media_type`; without one (or empty) anything goes.

    >>> accepts(None, COST_MAP_MEDIA), accepts("*/*", COST_MAP_MEDIA)
    (True, True)
    >>> accepts("application/alto-costmap+json, application/alto-error+json", COST_MAP_MEDIA)
    True
    >>> accepts("application/json", COST_MAP_MEDIA), accepts("application/*;q=0", COST_MAP_MEDIA)
    (False, False)
    """
    if not (accept or "").strip():
        return True
    family = media_type.split("/")[0]
    for item in (accept or "").split(","):
        media_range, *parameters = (part.strip().lower() for part in item.split(";"))
        if media_range in (media_type, f"{family}/*", "*/*") and not _refused(parameters):
            return True
    return False


def _refused(parameters: list[str]) -> bool:
    """A media range with quality `q=0` ("not acceptable", RFC 9110 section 12.4.2)."""
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip() == "q":
            try:
                return float(value) == 0
            except ValueError:
                return False
    return False
