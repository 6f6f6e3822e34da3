"""The one token check of nettel's protected HTTP endpoints (/admin/*, /ingest/*)."""

from __future__ import annotations

import base64
import binascii
import secrets

from fastapi import HTTPException


def require_token(token: str | None, authorization: str | None, *, basic: bool = False) -> None:
    """404 when `token` is None (the endpoint is disabled), 401 unless the request carries it:
    `Authorization: Bearer <token>`, or with `basic` also HTTP Basic with the token as password
    (any user name; what a URL's `user:token@` makes an HTTP client send)."""
    if token is None:
        raise HTTPException(404, "Not Found")
    given = _presented_secret(authorization or "", basic)
    if given is None or not secrets.compare_digest(given.encode(), token.encode()):
        challenge = 'Bearer, Basic realm="nettel"' if basic else "Bearer"
        raise HTTPException(401, "bearer token required", headers={"WWW-Authenticate": challenge})


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
