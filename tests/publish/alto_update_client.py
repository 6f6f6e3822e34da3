"""A small ALTO update stream client written from RFC 8895, with RFC 7396's merge patch.

It knows nothing of nettel: it opens an update stream with an `UpdateStreamReq`, reads the
server-sent events, keeps per client-id the document its substream describes (a full document
replaces it, an `application/merge-patch+json` event patches it), and sends stream control
requests to the control URI the first control update gives. Event names are
`<media type>,<client-id>` for data updates and `application/alto-updatestreamcontrol+json` for
control updates (RFC 8895 section 6.2).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

UPDATE_STREAM_PARAMS = "application/alto-updatestreamparams+json"
CONTROL = "application/alto-updatestreamcontrol+json"
MERGE_PATCH = "application/merge-patch+json"
EVENT_STREAM = "text/event-stream"


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 section 2, MergePatch(Target, Patch), as the RFC's pseudocode writes it."""
    if isinstance(patch, dict):
        result = dict(target) if isinstance(target, dict) else {}
        for name, value in patch.items():
            if value is None:
                result.pop(name, None)
            else:
                result[name] = apply_merge_patch(result.get(name), value)
        return result
    return patch


@dataclass
class Update:
    """One event: its media type, the client-id (None for control updates) and its data."""

    media_type: str
    client_id: str | None
    data: dict[str, Any]


@dataclass
class UpdateStreamClient:
    """An open update stream: its events, the documents they built and its control URI."""

    http: httpx.Client
    lines: Iterator[str]
    documents: dict[str, Any] = field(default_factory=dict)
    control_uri: str | None = None

    def next_update(self) -> Update:
        """The next event (comments skipped), applied to `documents`."""
        event: dict[str, str] = {}
        for line in self.lines:
            if not line:
                if "data" in event:
                    return self._apply(event["event"], json.loads(event["data"]))
                event = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "data" and "data" in event:  # a multi-line data field
                    value = f"{event['data']}\n{value}"
                event[name] = value
        raise EOFError("the update stream ended")

    def updates_until(self, client_id: str) -> list[Update]:
        """Events up to and including the next data update of `client_id`."""
        updates = [self.next_update()]
        while updates[-1].client_id != client_id:
            updates.append(self.next_update())
        return updates

    def control(self, request: dict[str, Any]) -> httpx.Response:
        """A stream control request (section 7): POST to the control URI."""
        assert self.control_uri, "no control URI received yet"
        headers = {"Content-Type": UPDATE_STREAM_PARAMS}
        return self.http.post(self.control_uri, content=json.dumps(request), headers=headers)

    def _apply(self, event: str, data: dict[str, Any]) -> Update:
        if event == CONTROL:
            self.control_uri = data.get("control-uri", self.control_uri)
            for client_id in data.get("stopped", []):
                self.documents.pop(client_id, None)
            return Update(event, None, data)
        media_type, _, client_id = event.rpartition(",")
        assert media_type and client_id, f"not a data update event: {event!r}"
        if media_type == MERGE_PATCH:
            assert client_id in self.documents, f"a patch of {client_id} before its document"
            self.documents[client_id] = apply_merge_patch(self.documents[client_id], data)
        else:
            self.documents[client_id] = data
        return Update(media_type, client_id, data)


@contextmanager
def open_update_stream(
    http: httpx.Client, uri: str, add: dict[str, Any]
) -> Iterator[UpdateStreamClient]:
    """An update stream of the substreams `add` (client-id -> AddUpdateReq), whose first event,
    the control update with the control URI, is already read."""
    headers = {"Content-Type": UPDATE_STREAM_PARAMS, "Accept": EVENT_STREAM}
    body = json.dumps({"add": add})
    with http.stream("POST", uri, content=body, headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"] == EVENT_STREAM
        client = UpdateStreamClient(http, response.iter_lines())
        first = client.next_update()
        assert first.media_type == CONTROL and client.control_uri, first
        yield client
