"""The HTTP routes: OpenAI's /v1 endpoints, /health and /metrics.

`add_routes` registers them on the app itself: a router included with `include_router` is
matched again at every level of nesting on each request (FastAPI's included routers resolve
lazily), which the completion routes pay per request."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from serving.engine.frontend.client import EngineClient
from serving.server.api.chat import chat_completions
from serving.server.api.completions import completions
from serving.server.api.protocol import ChatCompletionRequest, CompletionRequest
from serving.server.base.auth import request_principal
from serving.server.base.errors import APIError
from serving.server.base.state import Phase, ServerState
from serving.server.metrics.server_metrics import CONTENT_TYPE

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"description": text, "content": {"application/json": {}}}
    for code, text in [
        (400, "invalid request"),
        (401, "bad or missing API key"),
        (429, "waiting queue full"),
        (503, "loading or draining"),
    ]
}


def get_state(request: Request) -> ServerState:
    return request.app.state.vigil


def require_api_key(request: Request) -> None:
    """Every /v1 handler's first line: the guard middleware checked the key before the body was
    read and left the principal; without one (an app built without the guard) refuse."""
    request_principal(request)


async def health(request: Request) -> Response:
    state = get_state(request)
    if state.phase is Phase.READY:
        return JSONResponse({"status": "ok"})
    # the load error stays in the server log: it can name paths and internals
    return JSONResponse({"status": state.phase.value}, status_code=503)


async def metrics(request: Request) -> Response:
    return Response(get_state(request).metrics.render(), media_type=CONTENT_TYPE)


def _model_card(state: ServerState) -> dict:
    card = {
        "id": state.settings.model_name,
        "object": "model",
        "created": int(state.started_at),
        "owned_by": "vigil",
        "root": state.settings.model_version,
    }
    if state.engine is not None:
        card["max_model_len"] = state.max_model_len
        card["engine"] = _engine_identity(state.engine)
    return card


def _engine_identity(engine: EngineClient) -> dict:
    """What serves the model (the canaries record it: a numerics change names its stack)."""
    import importlib.metadata

    import torch

    ident = engine.identity()
    try:
        version = importlib.metadata.version("vigil")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return {
        "vigil": version,
        "torch": torch.__version__,
        "device": ident.device,
        "attention": ident.attention,
        "dtype": ident.dtype,
    }


async def list_models(request: Request) -> dict:
    require_api_key(request)
    return {"object": "list", "data": [_model_card(get_state(request))]}


async def retrieve_model(model_id: str, request: Request) -> dict:
    require_api_key(request)
    state = get_state(request)
    if model_id != state.settings.model_name:
        raise APIError(
            f"The model `{model_id}` does not exist.",
            status=404,
            param="model",
            code="model_not_found",
        )
    return _model_card(state)


async def create_chat_completion(body: ChatCompletionRequest, request: Request) -> Response:
    require_api_key(request)
    return await chat_completions(request, body, get_state(request))


async def create_completion(body: CompletionRequest, request: Request) -> Response:
    require_api_key(request)
    return await completions(request, body, get_state(request))


def add_routes(app: FastAPI) -> None:
    app.add_api_route("/health", health, methods=["GET"])
    app.add_api_route("/metrics", metrics, methods=["GET"])
    for path, endpoint, method in (
        ("/models", list_models, "GET"),
        ("/models/{model_id:path}", retrieve_model, "GET"),
        ("/chat/completions", create_chat_completion, "POST"),
        ("/completions", create_completion, "POST"),
    ):
        app.add_api_route("/v1" + path, endpoint, methods=[method], responses=ERROR_RESPONSES)
