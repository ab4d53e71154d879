"""The phone page's endpoints (SPEC section 12, H1-H6): each a small named view with one
job, over the same service, in the style of datasette's `BaseView`.

Owns what each request of the page does. `Page` is what every view shares: the service,
the origins (H4), the templates, the threads the page's calls take, and the secrets of
its checks (the pairing forms' CSRF tokens, bound to this process; the store's page key).
`View` is the base every endpoint is a subclass of: the shared checks (`session`: both
halves of a browser's credential, H3: the device token in an HttpOnly `SameSite=Lax`
cookie made by pairing, never a bearer token, and the page's key, derived from that token
and the store's page key, handed to the page's script once when it pairs and sent by it
in `X-Clankie-Key` with every request for data or for a change; `same_origin`: the Origin
of every state change, H4; `checked_post`: the pairing form's CSRF token) and a refusal
(`ClankieError`) turned into the answer its view gives (`refused`): the page's words,
never a traceback, beside the API's problem document (`said`), as a change's words are
beside the op's result (`_replied`: a receipt, a lease), and the question's binding is
data at `/api/question` (issue 42: nothing a program needs is only in English or HTML).
The HTML a navigation loads is a shell with no user data (`Home`), so a server on another
port of the host, which browsers send the cookie to, can read and change nothing; and the
key outlives a restart of the service, so an open page still answers.
What the page reads and says is `shown.py`; `app.py` only routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final, TypeVar
from urllib.parse import parse_qs, urlsplit

import anyio
import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from clankie import dto, wording
from clankie.api.app import parse_json, read_body
from clankie.api.problems import problem_body
from clankie.core.errors import ClankieError
from clankie.core.vocabulary import Code
from clankie.service import Service
from clankie.text import visible

from . import shown

LONG_POLL_MS: Final = 1_000  # H6: every change shows within 2 s, a revocation too
_THREADS: Final = 4  # the page's calls never take the threads the owner's socket uses
STATIC: Final = {"page.js": "text/javascript; charset=utf-8",
                 "page.css": "text/css; charset=utf-8"}

T = TypeVar("T")
OutT = TypeVar("OutT", bound=dto.Out)


class Origins:
    """The one origin the page is used from (`web_origin`) and the listener's own."""

    def __init__(self, listener: str, web_origin: str) -> None:
        self.allowed = {listener} | ({web_origin} if web_origin else set())
        self.hosts = {urlsplit(o).netloc for o in self.allowed}
        self.secure = web_origin.startswith("https://")
        self.public = web_origin or listener  # where links (pairing, answer_url) point


class Page:
    """What every view of the page shares, made once per listener (`listener`: its origin,
    http://127.0.0.1:PORT)."""

    def __init__(self, service: Service, listener: str) -> None:
        self.service = service
        self.origins = Origins(listener, service.settings.web_origin)
        self._secret = secrets.token_bytes(32)  # pairing forms' CSRF tokens: this process's
        self._page_key = service.devices.page_key()  # browsers' keys: outlive a restart
        self.cookie = "__Host-clankie" if self.origins.secure else "clankie"
        self.limiter = anyio.CapacityLimiter(_THREADS)
        self.lines = shown.Lines(service)
        # Every value shown is escaped for HTML and, like the CLI's and the TUI's, shows
        # the characters that hide or reorder text as escapes (SPEC section 10 "Text from
        # others").
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("clankie.web", "templates"), autoescape=True,
            undefined=jinja2.StrictUndefined,
            finalize=lambda v: visible(v) if isinstance(v, str) else v)
        self.templates.filters["local"] = shown.zoned  # the page adds "(in 5 min)" itself
        self.templates.filters["folders"] = shown.folders
        self.templates.filters["who"] = shown.who  # who asks (SPEC P3)
        self.templates.globals["AGENT_ANSWER"] = wording.AGENT_ANSWER

    def csrf(self, session: str) -> str:
        return hmac.new(self._secret, session.encode(), hashlib.sha256).hexdigest()

    def key_of(self, token: str) -> str:
        """The page's half of a browser's credential (H3): only the page that paired has
        it (in its origin's storage), and a restart keeps it."""
        return hmac.new(self._page_key,
                        b"page key\0" + token.encode("utf-8", "surrogateescape"),
                        hashlib.sha256).hexdigest()


class View:
    """One endpoint of the page: `respond` does its one job; a refusal raised on the way
    is answered by `refused`, in the page's words (by default `shown.refusal`) beside the
    API's problem document (`said`)."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.service = page.service

    async def handle(self, request: Request) -> Response:
        """The endpoint Starlette calls."""
        try:
            return await self.respond(request)
        except ClankieError as err:
            return await self.refused(err)

    async def respond(self, request: Request) -> Response:
        raise NotImplementedError

    async def refused(self, err: ClankieError) -> Response:
        return said(err, shown.refusal(err))

    # ---------------------------------------------------------------- shared helpers

    def render(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        return HTMLResponse(self.page.templates.get_template(template).render(**values),
                            status_code=status)

    async def run(self, work: Callable[[], T]) -> T:
        """Blocking work (the service, the store) on the page's own threads."""
        return await anyio.to_thread.run_sync(work, limiter=self.page.limiter)

    async def call(self, spec: dto.Op[Any, OutT], token: str | None, payload: object,
                   **who: str | None) -> OutT:
        """One op of the service for this browser, on the page's threads; the service
        validates `payload` (`shown.ask`)."""
        return await self.run(partial(shown.ask, self.service, spec, token, payload, **who))

    # ---------------------------------------------------------------- shared checks

    def session(self, request: Request) -> str:
        """The browser's token, when the request carries both halves (H3); else
        `unauthenticated`, saying which half is missing in words the page shows."""
        token = request.cookies.get(self.page.cookie) or ""
        if not token:
            raise ClankieError(Code.UNAUTHENTICATED, shown.NOT_PAIRED)
        given = request.headers.get("x-clankie-key", "")
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"),
                                   self.page.key_of(token).encode()):
            raise ClankieError(Code.UNAUTHENTICATED, shown.PAIR_AGAIN)
        return token

    def same_origin(self, request: Request) -> None:
        """H4: a state change comes from the page's own origin."""
        if request.headers.get("origin") not in self.page.origins.allowed:
            raise ClankieError(Code.FORBIDDEN, "this request did not come from clankie's page")

    def checked_post(self, request: Request, session_key: str, given: str | None) -> None:
        """The pairing form: its Origin and this process's CSRF token for its code."""
        self.same_origin(request)
        if not given or not hmac.compare_digest(given.encode("utf-8", "surrogateescape"),
                                                self.page.csrf(session_key).encode()):
            raise ClankieError(Code.FORBIDDEN, "this pairing form is from before clankie "
                               "restarted; open the pairing link again")


# ---------------------------------------------------------------------------- pairing


class PairForm(View):
    """GET /pair?code=: "Pair this browser as NAME?", using nothing (H2)."""

    async def respond(self, request: Request) -> Response:
        code = request.query_params.get("code", "")
        pairing = await self.run(partial(self.service.devices.pairing_preview, code))
        return self.render("pair.html", name=pairing.name, mode=pairing.mode.value,
                           word=pairing.word, code=code, csrf=self.page.csrf("pair:" + code))

    async def refused(self, err: ClankieError) -> Response:
        return self.render("message.html", err.status, title="Cannot pair",
                           text=shown.pairing_refused(err))


class Pair(View):
    """POST /pair: the form's code pairs this browser (H2, H3); the key to its script."""

    async def respond(self, request: Request) -> Response:
        form = _form(await read_body(request))
        code = form.get("code", "")
        self.checked_post(request, "pair:" + code, form.get("csrf"))
        made = await self.call(dto.DEVICE_PAIR_FINISH, None, {"code": code},
                               peer=_peer(request),
                               user_agent=request.headers.get("user-agent"))
        # The key goes to the page's script, once, to keep in its origin's storage; the
        # token, to the cookie. Lax: a tap on answer_url from another app carries it (H7).
        response = JSONResponse({"outcome": "paired", "key": self.page.key_of(made.token),
                                 "credential_id": made.credential_id})
        response.set_cookie(self.page.cookie, made.token, max_age=400 * 86_400, path="/",
                            secure=self.page.origins.secure, httponly=True, samesite="lax")
        return response

    async def refused(self, err: ClankieError) -> Response:
        return said(err, {"outcome": "refused", "message": shown.pairing_refused(err)})


# --------------------------------------------------------------------------- the page


class Home(View):
    """GET /: the shell (H3): no user data; its script asks for the view with both halves."""

    async def respond(self, request: Request) -> Response:
        return self.render("home.html")


class Fragment(View):
    """GET /view: what the page shows (H5), read with this browser's own token."""

    async def respond(self, request: Request) -> Response:
        token = self.session(request)
        view = await self.run(partial(
            shown.read_view, self.service, token, self.page.lines,
            request.query_params.get("c"), request.query_params.get("r"),
            request.query_params.get("n")))
        return self.render("view.html", **view)

    async def refused(self, err: ClankieError) -> Response:
        return said(err, {"outcome": "revoked", "message": shown.session_refused(err)})


class Events(View):
    """GET /api/events: a long-poll on `events_tail` (H6); its reply says whether to look
    again and, when the page sends `live` (D17: the same input as `events_tail`'s, D4, as
    JSON in the address: a reply ID and a length, never text), the live reply as
    `events_tail` answers it. A long-poll woken by a publish alone is answered from memory,
    as the service's own edge does."""

    async def respond(self, request: Request) -> Response:
        conversation_id = request.query_params.get("c", "")
        after = request.query_params.get("after", "0")
        live = request.query_params.get("live")
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(woken.set)

        token = self.session(request)
        payload: dict[str, Any] = {
            "conversation_id": conversation_id, "wait_ms": LONG_POLL_MS,
            "after": int(after) if re.fullmatch(r"[0-9]{1,18}", after) else 0}
        if live is not None:
            payload["live"] = _live_input(live)  # checked by the service, as any client's
        with self.service.open_poll(dto.EVENTS_TAIL.name, token, payload, wake) as tail:
            while True:
                woken.clear()
                page = tail.read_quickly()  # a live reply published: from memory (D4)
                if page is None:
                    page = await self.run(tail.read)
                if page is not None:
                    assert isinstance(page, dto.EventsOut)
                    answer = page.model_dump(mode="json", include={"next_after", "live"})
                    return JSONResponse({**answer, "changed": bool(page.events)})
                with anyio.move_on_after(tail.remaining()):
                    await woken.wait()



class Question(View):
    """GET /api/question?c=&r=: the question's binding as data (issue 42): `input_get` for
    this browser, as the API answers it (the conversation's incarnation and revision, the
    pending question and its options' IDs, or the one `r` names), for a program that
    answers through the page. The page's own script binds to what it displayed, in the
    view's HTML."""

    async def respond(self, request: Request) -> Response:
        token = self.session(request)
        payload = {"conversation_id": request.query_params.get("c", "")}
        if "r" in request.query_params:
            payload["request_id"] = request.query_params["r"]
        snapshot = await self.call(dto.INPUT_GET, token, payload)
        return JSONResponse(snapshot.model_dump(mode="json"))


class Action(View):
    """POST /api/...: a change the browser asks for, from the page's own origin (H4) with
    both halves (H3); its outcome, or why nothing was sent, in words (H5)."""

    async def respond(self, request: Request) -> Response:
        self.same_origin(request)
        token = self.session(request)
        payload = parse_json(await read_body(request))
        try:
            return await self.act(token, payload)
        except ClankieError as err:
            return said(err, await self.run(partial(self.explained, token, payload, err)))

    async def act(self, token: str, payload: object) -> Response:
        raise NotImplementedError

    def explained(self, token: str, payload: object, err: ClankieError) -> Mapping[str, object]:
        """Why nothing was sent, in words the owner can act on (on a worker thread)."""
        return shown.refused(self.service, token, None, err)


class Answer(Action):
    """POST /api/answer: `input_answer`, and what it chose."""

    async def act(self, token: str, payload: object) -> Response:
        reply = await self.call(dto.INPUT_ANSWER, token, payload)
        if reply.duplicate:
            return _duplicate(reply)
        answer = shown.accepted(dto.INPUT_ANSWER, payload)
        chosen = await self.run(partial(shown.chosen, self.service, token, answer))
        return _replied(reply, "accepted", f"Accepted: {chosen}. "
                        f"{wording.accepted(reply.receipt.model_dump())}")

    def explained(self, token: str, payload: object, err: ClankieError) -> Mapping[str, object]:
        return shown.refused(self.service, token, shown.accepted(dto.INPUT_ANSWER, payload),
                             err)


class Cancel(Action):
    """POST /api/cancel: `input_cancel`; no run of Clankie follows (A12)."""

    async def act(self, token: str, payload: object) -> Response:
        reply = await self.call(dto.INPUT_CANCEL, token, payload)
        if reply.duplicate:
            return _duplicate(reply)
        cancel = shown.accepted(dto.INPUT_CANCEL, payload)
        agent = await self.run(partial(shown.asked_by_agent, self.service, token, cancel))
        return _replied(reply, "accepted", "Cancelled. " + (  # A12: no run
            "The agent reads that it has no answer." if agent else
            "No answer was sent, and no run of Clankie follows."))

    def explained(self, token: str, payload: object, err: ClankieError) -> Mapping[str, object]:
        return shown.refused(self.service, token, shown.accepted(dto.INPUT_CANCEL, payload),
                             err)


class TakeControl(Action):
    """POST /api/take-control: `device_take_control` (H5's lease)."""

    async def act(self, token: str, payload: object) -> Response:
        lease = await self.call(dto.DEVICE_TAKE_CONTROL, token, {})
        # the lease line says until when, and follows the clock; this says it once
        return _replied(lease, "control", "You took control: you can answer now.")


class NoSuchAction(Action):
    """POST /api/{anything else}: checked like every action, then `not_found`."""

    async def act(self, token: str, payload: object) -> Response:
        raise ClankieError(Code.NOT_FOUND, "there is no such action")


def _replied(reply: dto.Out, outcome: str, message: str) -> Response:
    """A change's outcome in words (`outcome`, `message`) beside the op's result as the API
    returns it (an answer's or a cancel's receipt and `duplicate`, a lease)."""
    return JSONResponse({**reply.model_dump(mode="json"), "outcome": outcome,
                         "message": message})


def _duplicate(reply: dto.AnswerReply) -> Response:
    return _replied(reply, "duplicate", "The same answer again: it was already accepted, "
                    "and nothing changed.")


def said(err: ClankieError, words: Mapping[str, object]) -> Response:
    """A refusal as the API's problem document (`type`, `title`, `status`, `detail`, `code`
    and its extras: a receipt, the current revision) with the page's words beside it
    (`outcome`, `message`, and what they read: how an ended question ended): a program
    reads the code, the owner the words (issue 42)."""
    return JSONResponse({**problem_body(err), **words}, status_code=err.status)


# ------------------------------------------------------------------- what is not data


class Static(View):
    """GET /static/{name}: the page's script and style, and nothing else."""

    async def respond(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return self.render("message.html", 404, title="Not found",
                               text="There is no such page.")
        return Response(_asset(name), media_type=STATIC[name])


class NoIcon(View):
    """GET /favicon.ico: a browser asks; none, and no 404."""

    async def respond(self, request: Request) -> Response:
        return Response(status_code=204)


class NotFound(View):
    """Any other address: not found, in words."""

    async def respond(self, request: Request) -> Response:
        return self.render("message.html", 404, title="Not found",
                           text="There is no such page.")


def _peer(request: Request) -> str | None:
    """Who is trying to pair (H2): the browser's connection, as the listener saw it.
    Wrong codes are limited per connection; this authenticates nobody."""
    client = request.client
    return None if client is None else f"web {client.host}:{client.port}"


def _live_input(given: str) -> object:
    """The `live` field as the page sent it (JSON), for the service to check (D4)."""
    try:
        return json.loads(given)
    except (ValueError, RecursionError):
        raise ClankieError(Code.INVALID_REQUEST, "live must be JSON: {reply_id, offset}"
                           ) from None


def _form(body: bytes) -> dict[str, str]:
    try:
        fields = parse_qs(body.decode("utf-8"), max_num_fields=10, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        return {}
    return {k: v[0] for k, v in fields.items()}


def _asset(name: str) -> bytes:
    from importlib.resources import files

    return files("clankie.web").joinpath("static", name).read_bytes()
