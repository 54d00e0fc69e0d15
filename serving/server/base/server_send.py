"""`ServerSend`: the outermost of the app's own middleware keeps the `send` it was given in the
scope, so a streamed response can write body chunks past the layers inside it.

Every layer inside it (the RequestGuard, Starlette's exception middleware and the route's
exception wrapper) wraps `send` only to note that the response has started; for a body chunk
each is one more coroutine call per SSE event. The response start still goes through all of
them, so each sees it and knows the response began. A middleware that must see or change the
body belongs outside this one: `add_middleware` after `create_app` puts it there.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

SCOPE_KEY = "vigil.server_send"


class ServerSend:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[SCOPE_KEY] = send
        await self.app(scope, receive, send)


def server_send(scope: Scope) -> Send | None:
    """The `send` to write body chunks with, once the response start went through the chain
    (None outside an app with ServerSend: then use the chain's)."""
    return scope.get(SCOPE_KEY)
