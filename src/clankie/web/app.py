"""The phone page's HTTP edge (SPEC section 12, H1-H6): one more surface over the service.

Owns the `--web` listener's routes and what stands before every one of them (`_Guard`,
H4): the Host check (DNS rebinding), no bearer token, only GET, HEAD and POST, and the
security headers of every response. Each route is a small named view (`views.py`: the
browser's two-halved credential, H3, and the Origin check of every state change live in
their base); what the page reads and says is `shown.py`. It decides nothing the service
decides: who may answer, whether an answer binds, whether a code pairs are all the
service's. Started by `clankie serve` (`clankie/serve.py`), which is above it.
"""

from __future__ import annotations

from typing import Final

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clankie.service import Service

from . import views
from .views import Origins

SECURITY_HEADERS: Final = {
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self'; connect-src 'self'; form-action 'self'; "
                               "base-uri 'none'; object-src 'none'; frame-ancestors 'none'",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
}


def create_web_app(service: Service, listener: str) -> ASGIApp:
    """The page's app for a listener at `listener` (an origin: http://127.0.0.1:PORT):
    each address routed to its view, behind the guard."""
    page = views.Page(service, listener)
    app = Starlette(routes=[
        Route("/", views.Home(page).handle),
        Route("/view", views.Fragment(page).handle),
        Route("/pair", views.PairForm(page).handle, methods=["GET"]),
        Route("/pair", views.Pair(page).handle, methods=["POST"]),
        Route("/api/events", views.Events(page).handle),
        Route("/api/question", views.Question(page).handle, methods=["GET"]),
        Route("/api/answer", views.Answer(page).handle, methods=["POST"]),
        Route("/api/cancel", views.Cancel(page).handle, methods=["POST"]),
        Route("/api/take-control", views.TakeControl(page).handle, methods=["POST"]),
        Route("/api/{action}", views.NoSuchAction(page).handle, methods=["POST"]),
        Route("/static/{name}", views.Static(page).handle),
        Route("/favicon.ico", views.NoIcon(page).handle),
        Route("/{rest:path}", views.NotFound(page).handle,
              methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ])
    return _Guard(app, page.origins)


class _Guard:
    """H4 before any route: the Host, no bearer token, and the headers of every response."""

    def __init__(self, app: ASGIApp, origins: Origins) -> None:
        self.app = app
        self.origins = origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the app's own
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope["headers"]}
        refusal = None
        if headers.get("host") not in self.origins.hosts:
            refusal = (421, "This address is not clankie's page.")  # DNS rebinding
        elif "authorization" in headers:
            refusal = (400, "The page takes no bearer token; it uses its pairing cookie.")
        elif scope["method"] not in ("GET", "HEAD", "POST"):
            refusal = (405, "Not allowed.")

        async def send_guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", [])
                        if k.decode("latin-1").lower() not in SECURITY_HEADERS]
                message["headers"] = kept + [(k.encode(), v.encode())
                                             for k, v in SECURITY_HEADERS.items()]
            await send(message)

        if refusal is not None:
            response: ASGIApp = Response(refusal[1], status_code=refusal[0],
                                         media_type="text/plain; charset=utf-8")
            await response(scope, receive, send_guarded)
            return
        await self.app(scope, receive, send_guarded)
