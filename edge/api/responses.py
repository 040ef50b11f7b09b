"""Responses built from lakefs-sdk models: serialized by the model itself (aliases, no unset
optional fields), so what is sent is what the SDK reads back."""

from __future__ import annotations

from fastapi.responses import JSONResponse, Response
from pydantic.v1 import BaseModel


def model_response(model: BaseModel, status: int = 200) -> JSONResponse:
    return JSONResponse(model.to_dict(), status_code=status)  # type: ignore[attr-defined]


def no_content() -> Response:
    return Response(status_code=204)


def text_response(text: str, status: int) -> Response:
    return Response(text, status_code=status, media_type="text/html")
