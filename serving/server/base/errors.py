"""Errors the OpenAI way: `{"error": {"message", "type", "param", "code"}}` with the right status.

Validation failures (including malformed JSON) are 400, not FastAPI's 422; any unexpected
exception is logged and answered as a 500 in the same shape, never as a bare traceback. A
stream whose headers are gone ends with the same object as an SSE event (`in_band`).
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    408: "invalid_request_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "internal_error",
    503: "service_unavailable",
}


class APIError(Exception):
    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        type: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.code = code
        self.type = type or _TYPES.get(status, "invalid_request_error")

    def payload(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JSONResponse:
        headers = {"Retry-After": "1"} if self.status in (429, 503) else None
        return JSONResponse(self.payload(), status_code=self.status, headers=headers)


def in_band(exc: BaseException) -> dict:
    """The error event a stream ends with once its headers are sent: what the non-streaming
    path would answer for the same failure (an APIError as is, anything else the handler's 500),
    with a code always set (the type's, when the error names none)."""
    if not isinstance(exc, APIError):
        log.error("stream failed", exc_info=exc)
        exc = APIError("internal server error", status=500, code="internal_error")
    payload = exc.payload()
    payload["error"]["code"] = exc.code or exc.type
    return payload


def openai_error_json(status: int, message: str, code: str) -> bytes:
    """The request guard's refusals (401/413/408) in OpenAI's error shape."""
    return json.dumps(APIError(message, status=status, code=code).payload()).encode()


def _param_from_loc(loc: tuple) -> str | None:
    """("body", "messages", 0, "role") -> "messages.[0].role" (OpenAI's spelling)."""
    parts = [p for p in loc if p != "body"]
    # pydantic adds the union member's type name to the location; it names nothing the client sent
    parts = [p for p in parts if not (isinstance(p, str) and ("[" in p or p in _UNION_TAGS))]
    if not parts:
        return None
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in parts)


_UNION_TAGS = {
    "str",
    "int",
    "float",
    "bool",
    "list",
    "dict",
    "none",
    "function-after",
    "TextPart",
    "constrained-str",
}


def validation_error(exc: RequestValidationError) -> APIError:
    errors = exc.errors()
    if not errors:
        return APIError("invalid request body")
    first = errors[0]
    if first.get("type") == "json_invalid":
        return APIError(
            f"request body is not valid JSON: {first.get('ctx', {}).get('error', '')}".rstrip(": "),
            code="invalid_json",
        )
    param = _param_from_loc(tuple(first.get("loc", ())))
    msg = first.get("msg", "invalid value")
    if param:
        msg = f"{param}: {msg}"
    if len(errors) > 1:
        msg += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return APIError(msg, param=param, code="invalid_value")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_error(exc).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        phrase = (
            HTTPStatus(exc.status_code).phrase
            if exc.status_code in HTTPStatus._value2member_map_
            else ""
        )
        message = exc.detail if isinstance(exc.detail, str) else phrase
        return APIError(message or phrase, status=exc.status_code).response()

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return APIError("internal server error", status=500, code="internal_error").response()
