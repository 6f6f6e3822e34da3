"""The one token check of nettel's protected HTTP endpoints (/admin/*, /ingest/*)."""

from __future__ import annotations

import base64
import binascii
import secrets

from fastapi import HTTPException


def require_token(token: str | None, authorization: str | None) -> None:
    """For a FastAPI route: 404 when `token` is None (the endpoint is disabled), 401 unless the
    request carries `Authorization: Bearer <token>`."""
    if token is None:
        raise HTTPException(404, "Not Found")
    if not carries_token(token, authorization):
        raise HTTPException(401, "bearer token required", headers={"WWW-Authenticate": "Bearer"})


def carries_token(token: str, authorization: str | None, *, basic: bool = False) -> bool:
    """Whether `Authorization` is `Bearer <token>`, or with `basic` also HTTP Basic with the
    token as password (any user name: what a URL's `user:token@` makes an HTTP client send)."""
    given = _presented_secret(authorization or "", basic)
    return given is not None and secrets.compare_digest(given.encode(), token.encode())


def _presented_secret(authorization: str, basic: bool) -> str | None:
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return credentials
    if not basic or scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return decoded.partition(":")[2]
