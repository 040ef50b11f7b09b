"""The login session cookie, set and dropped with the same attributes (a browser drops a
cookie only when path, Secure and SameSite match the ones it was set with)."""

from __future__ import annotations

import time

from fastapi import Request, Response

from edge.api.context import SESSION_COOKIE


def _secure_cookies(request: Request) -> bool:
    configured: bool | None = request.app.state.config.api.secure_cookies
    return request.url.scheme == "https" if configured is None else configured


def set_session_cookie(request: Request, response: Response, token: str, expires: int) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=max(0, expires - int(time.time())),
        path="/",
        httponly=True,
        samesite="lax",
        secure=_secure_cookies(request),
    )


def drop_session_cookie(request: Request, response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", secure=_secure_cookies(request), httponly=True, samesite="lax")
