"""The phone page's HTTP edge (SPEC section 12, H1-H6): one more surface over the service.

Owns the `--web` listener's requests: the Host check, the security headers of every
response, the browser's two-halved credential (H3) and the Origin check of every state
change, and turning the service's replies into HTML and plain words. The two halves: the
device token in an HttpOnly `SameSite=Lax` cookie (made by pairing; never a bearer token),
and the page's key, derived from that token and the store's page key, handed to the
page's script once when it pairs and sent by it in `X-Clankie-Key` with every request for
data or for a change. The HTML a navigation loads is a shell with no user data, so a
server on another port of the host, which browsers send the cookie to, can read and change
nothing; and the key outlives a restart of the service, so an open page still answers.
The view (H5) is read with the browser's own token: the conversations, one question, what
led to it (the conversation's last lines through `events_tail`, with a small cache of where
each browser's last read stopped) and how a question it showed ended, in words. It
decides nothing the service decides: who may answer, whether an answer binds, whether a
code pairs are all the service's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import re
import secrets
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from functools import partial
from typing import Any, Final, cast
from urllib.parse import parse_qs, urlsplit

import anyio
import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clankie import dto, when, wording
from clankie.agent.tools import ASK_QUESTION
from clankie.api.app import parse_json, read_body
from clankie.core.errors import ClankieError
from clankie.core.vocabulary import Code, Reason
from clankie.service import Service
from clankie.text import visible

log = logging.getLogger("clankie.web")

LONG_POLL_MS: Final = 1_000  # H6: every change shows within 2 s, a revocation too
_THREADS: Final = 4  # the page's calls never take the threads the owner's socket uses
SECURITY_HEADERS: Final = {
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self'; connect-src 'self'; form-action 'self'; "
                               "base-uri 'none'; object-src 'none'; frame-ancestors 'none'",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
}
STATIC: Final = {"page.js": "text/javascript; charset=utf-8",
                 "page.css": "text/css; charset=utf-8"}
# Refusals that mean "the question changed since the page showed it" (an answer that came
# second to another is one too: the page shows the question afresh, ended or not).
CONFLICTS: Final = wording.READ_AGAIN | {Code.ALREADY_ANSWERED}
CONTEXT_LINES: Final = 6  # H5: what led to a question, one line each
CONTEXT_CHARS: Final = 280  # a line's length at most (the rest is on the computer)
_PAGE: Final = 500  # events_tail's largest page


class Origins:
    """The one origin the page is used from (`web_origin`) and the listener's own."""

    def __init__(self, listener: str, web_origin: str) -> None:
        self.allowed = {listener} | ({web_origin} if web_origin else set())
        self.hosts = {urlsplit(o).netloc for o in self.allowed}
        self.secure = web_origin.startswith("https://")
        self.public = web_origin or listener  # where links (pairing, answer_url) point


def create_web_app(service: Service, listener: str) -> ASGIApp:
    """The page's app for a listener at `listener` (an origin: http://127.0.0.1:PORT)."""
    origins = Origins(listener, service.settings.web_origin)
    secret = secrets.token_bytes(32)  # pairing forms' CSRF tokens: bound to this process
    page_key = service.devices.page_key()  # browsers' keys: bound to the store, outlive a restart
    cookie = "__Host-clankie" if origins.secure else "clankie"
    limiter = anyio.CapacityLimiter(_THREADS)
    context = Context(service)
    # Every value shown is escaped for HTML and, like the CLI's and the TUI's, shows the
    # characters that hide or reorder text as escapes (SPEC section 10 "Text from others").
    templates = jinja2.Environment(loader=jinja2.PackageLoader("clankie.web", "templates"),
                                   autoescape=True, undefined=jinja2.StrictUndefined,
                                   finalize=lambda v: visible(v) if isinstance(v, str) else v)
    templates.filters["local"] = _zoned  # the page adds "(in 5 min)" by its own clock
    templates.filters["folders"] = _folders
    templates.filters["who"] = _who  # who asks (SPEC P3), as the CLI and TUI say it
    templates.globals["AGENT_ANSWER"] = wording.AGENT_ANSWER

    def csrf(session: str) -> str:
        return hmac.new(secret, session.encode(), hashlib.sha256).hexdigest()

    def key_of(token: str) -> str:
        """The page's half of a browser's credential (H3): only the page that paired has
        it (in its origin's storage), and a restart keeps it."""
        return hmac.new(page_key, b"page key\0" + token.encode("utf-8", "surrogateescape"),
                        hashlib.sha256).hexdigest()

    def page(template: str, status: int = 200, **values: Any) -> HTMLResponse:
        return HTMLResponse(templates.get_template(template).render(**values),
                            status_code=status)

    async def run(work: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(work, limiter=limiter)

    def session(request: Request) -> str:
        """The browser's token, when the request carries both halves (H3); else
        `unauthenticated`, saying which half is missing in words the page shows."""
        token = request.cookies.get(cookie) or ""
        if not token:
            raise ClankieError(Code.UNAUTHENTICATED, NOT_PAIRED)
        given = request.headers.get("x-clankie-key", "")
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"),
                                   key_of(token).encode()):
            raise ClankieError(Code.UNAUTHENTICATED, PAIR_AGAIN)
        return token

    def same_origin(request: Request) -> None:
        """H4: a state change comes from the page's own origin."""
        if request.headers.get("origin") not in origins.allowed:
            raise ClankieError(Code.FORBIDDEN, "this request did not come from clankie's page")

    def checked_post(request: Request, session_key: str, given: str | None) -> None:
        """The pairing form: its Origin and this process's CSRF token for its code."""
        same_origin(request)
        if not given or not hmac.compare_digest(given.encode("utf-8", "surrogateescape"),
                                                csrf(session_key).encode()):
            raise ClankieError(Code.FORBIDDEN, "this pairing form is from before clankie "
                               "restarted; open the pairing link again")

    # ------------------------------------------------------------------------ pairing

    async def pair_form(request: Request) -> Response:
        code = request.query_params.get("code", "")
        try:
            pairing = await run(partial(service.devices.pairing_preview, code))
        except ClankieError as err:
            return page("message.html", err.status, title="Cannot pair",
                        text=_pairing_refused(err))
        return page("pair.html", name=pairing.name, mode=pairing.mode.value,
                    word=pairing.word, code=code, csrf=csrf("pair:" + code))

    async def pair(request: Request) -> Response:
        try:
            form = _form(await read_body(request))
            code = form.get("code", "")
            checked_post(request, "pair:" + code, form.get("csrf"))
            made = await run(partial(service.call, "device_pair_finish", None, {"code": code},
                                     peer=_peer(request),
                                     user_agent=request.headers.get("user-agent")))
        except ClankieError as err:
            return JSONResponse({"outcome": "refused", "message": _pairing_refused(err)},
                                status_code=err.status)
        # The key goes to the page's script, once, to keep in its origin's storage; the
        # token, to the cookie. Lax: a tap on answer_url from another app carries it (H7).
        response = JSONResponse({"outcome": "paired", "key": key_of(made.token)})
        response.set_cookie(cookie, made.token, max_age=400 * 86_400, path="/",
                            secure=origins.secure, httponly=True, samesite="lax")
        return response

    # ---------------------------------------------------------------------- the page

    async def home(request: Request) -> Response:
        """The shell (H3): no user data; its script asks for the view with both halves."""
        return page("home.html")

    async def fragment(request: Request) -> Response:
        try:
            token = session(request)
            view = await run(partial(_view, service, token, context,
                                     request.query_params.get("c"),
                                     request.query_params.get("r"),
                                     request.query_params.get("n")))
        except ClankieError as err:
            return JSONResponse({"outcome": "revoked", "message": _session_refused(err)},
                                status_code=err.status)
        return page("view.html", **view)

    async def act(request: Request) -> Response:
        """POST /api/{action}: answer, cancel, take-control; the outcome in words."""
        action = request.path_params["action"]
        token: str | None = None
        payload: Any = None
        try:
            same_origin(request)
            token = session(request)
            payload = parse_json(await read_body(request))
            if action == "take-control":
                await run(partial(service.call, "device_take_control", token, {}))
                # the lease line says until when, and follows the clock; this says it once
                return JSONResponse({"outcome": "control",
                                     "message": "You took control: you can answer now."})
            if action not in ("answer", "cancel"):
                raise ClankieError(Code.NOT_FOUND, "there is no such action")
            op = "input_answer" if action == "answer" else "input_cancel"
            reply = await run(partial(service.call, op, token, payload))
        except ClankieError as err:
            said = await run(partial(_refused, service, token, payload if action in (
                "answer", "cancel") else None, err))
            return JSONResponse(said, status_code=err.status)
        if reply.duplicate:
            return JSONResponse({"outcome": "duplicate", "message": "The same answer again: it "
                                 "was already accepted, and nothing changed."})
        if action == "answer":
            chosen = await run(partial(_chosen, service, token, payload))
            return JSONResponse({"outcome": "accepted", "message": f"Accepted: {chosen}. "
                                 f"{wording.accepted(reply.receipt.model_dump())}"})
        agent = await run(partial(_asked_by_agent, service, token, payload))
        return JSONResponse({"outcome": "accepted", "message": "Cancelled. " + (  # A12: no run
            "The agent reads that it has no answer." if agent else
            "No answer was sent, and no run of Clankie follows.")})

    async def events(request: Request) -> Response:
        """A long-poll on `events_tail` (H6); its reply says only whether to look again."""
        conversation_id = request.query_params.get("c", "")
        after = request.query_params.get("after", "0")
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(woken.set)

        try:
            token = session(request)
            payload = {"conversation_id": conversation_id, "wait_ms": LONG_POLL_MS,
                       "after": int(after) if re.fullmatch(r"[0-9]{1,18}", after) else 0}
            with service.open_poll("events_tail", token, payload, wake) as tail:
                while True:
                    woken.clear()
                    page_ = await run(tail.read)
                    if page_ is not None:
                        return JSONResponse({"next_after": page_.next_after,
                                             "changed": bool(page_.events)})
                    with anyio.move_on_after(tail.remaining()):
                        await woken.wait()
        except ClankieError as err:
            return JSONResponse(_refusal(err), status_code=err.status)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return page("message.html", 404, title="Not found", text="There is no such page.")
        return Response(_asset(name), media_type=STATIC[name])

    async def no_icon(request: Request) -> Response:  # a browser asks; none, and no 404
        return Response(status_code=204)

    async def not_found(request: Request) -> Response:
        return page("message.html", 404, title="Not found", text="There is no such page.")

    app = Starlette(routes=[
        Route("/", home), Route("/view", fragment),
        Route("/pair", pair_form, methods=["GET"]), Route("/pair", pair, methods=["POST"]),
        Route("/api/events", events), Route("/api/{action}", act, methods=["POST"]),
        Route("/static/{name}", static), Route("/favicon.ico", no_icon),
        Route("/{rest:path}", not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ])
    return _Guard(app, origins)


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


class Context:
    """What led to a question (H5): the last lines of a conversation (the owner's
    messages, Clankie's replies, tool activity, one line each), read with the browser's own
    token through `events_tail`, on from where its last read stopped (a page looks every
    second; a conversation keeps up to `event_retention` events)."""

    def __init__(self, service: Service, kept: int = 64) -> None:
        self.service = service
        self.kept = kept
        self.lock = threading.Lock()
        self.seen: OrderedDict[tuple[str, str], tuple[int, deque[dict[str, str]]]] = (
            OrderedDict())

    def lines(self, token: str | None, conversation_id: str) -> list[dict[str, str]]:
        key = (token or "", conversation_id)
        with self.lock:
            after, lines = self.seen.pop(key, (0, deque(maxlen=CONTEXT_LINES)))
        while True:
            page = cast(dto.EventsOut, self.service.call(
                "events_tail", token, {"conversation_id": conversation_id, "after": after,
                                       "limit": _PAGE}))
            for event in page.events:
                line = _context_line(event.model_dump())
                if line is not None:
                    lines.append(line)
            after = page.next_after
            if len(page.events) < _PAGE:
                break
        with self.lock:
            self.seen[key] = (after, lines)
            while len(self.seen) > self.kept:
                self.seen.popitem(last=False)
        return list(lines)


def _context_line(event: dict[str, Any]) -> dict[str, str] | None:
    """One event as a line of the context (H5), or None for those the question says."""
    kind = event.get("type")
    if kind == "message":
        who = {"owner": "You", "clankie": "Clankie"}.get(str(event["author"]),
                                                         str(event["author"]).capitalize())
        return {"who": who, "text": _cut(str(event["text"])), "kind": "message"}
    if kind == "tool_activity" and event.get("tool") != ASK_QUESTION:  # the question says it
        return {"who": "Tool", "text": _cut(str(event["summary"])), "kind": "tool"}
    if kind == "conversation_reset":
        return {"who": "", "text": "The conversation was reset.", "kind": "note"}
    if kind == "run_status" and event.get("status") == "failed":
        why = wording.run_ended(event.get("error")) or str(event.get("error") or "no reason")
        return {"who": "", "text": _cut(f"Clankie's run failed: {why}"), "kind": "note"}
    return None


def _cut(text: str) -> str:
    line = wording.one_line(text)
    return line if len(line) <= CONTEXT_CHARS else line[:CONTEXT_CHARS - 1] + "…"


def _view(service: Service, token: str | None, context: Context | None,
          conversation_id: str | None, shown_request: str | None = None,
          noted_request: str | None = None) -> dict[str, Any]:
    """What the page shows (H5): the device, conversations with a question first, and one
    question; read from the service with this browser's own token. `shown_request` is the
    question the page showed last, `noted_request` the one whose end it says now: the
    newest of them that has ended is said ended, and how, until another ends after it; the
    page watches the question pending now (trial: it kept watching a cancelled one, and
    said that forever while later questions were answered elsewhere)."""
    device = service.devices.device_status(token)
    listed = cast(dto.ConversationsOut,
                  service.call("conversation_list", token, {"limit": 50})).conversations
    pending = {}
    for c in listed:  # archived ones are not listed; the list says where a question waits
        snap = _snapshot(service, token, c.conversation_id) if c.pending else None
        if snap is not None and snap.pending is not None:
            pending[c.conversation_id] = snap
    ordered = ([c for c in listed if c.conversation_id in pending]
               + [c for c in listed if c.conversation_id not in pending])
    chosen = conversation_id if conversation_id in {c.conversation_id for c in listed} else (
        ordered[0].conversation_id if pending else None)
    snapshot = pending.get(chosen) if chosen else None
    if chosen and snapshot is None:
        snapshot = _snapshot(service, token, chosen)
    live = snapshot.pending.request_id if snapshot and snapshot.pending else ""
    ended, noted = None, ""
    for candidate in (shown_request, noted_request):
        if not chosen or not candidate or candidate == live:
            continue
        with contextlib.suppress(ClankieError):  # an evicted receipt: nothing to say
            shown = _snapshot(service, token, chosen, candidate).request
            if shown is not None and shown.status != "pending":
                ended, noted = _ended(shown, device.credential_id), candidate
                break
    return {"device": device, "conversations": ordered, "pending": set(pending),
            "ttl": service.settings.take_control_ttl,  # how long a lease taken now lasts
            "context": context.lines(token, chosen) if context and chosen else [],
            "chosen": chosen, "snapshot": snapshot, "ended": ended,
            "current": next((c for c in listed if c.conversation_id == chosen), None),
            # the question the page watches (pending now, else the one said ended) and the
            # one whose end it says
            "watched": live or noted, "noted": noted}


def _chosen(service: Service, token: str | None, answer: dict[str, Any]) -> str:
    """What an accepted answer chose, in the owner's words: the option's label in quotes
    and made visible (red team: a label "No. Nothing was sent: ..." or one with U+202E
    passed for the page's own words in its status line), or "your text answer"."""
    option_id = answer.get("option_id")
    if not option_id:
        return "your text answer"
    with contextlib.suppress(ClankieError):
        shown = _snapshot(service, token, str(answer.get("conversation_id")),
                          str(answer.get("request_id"))).request
        for option in shown.options if shown is not None else []:
            if option.option_id == option_id:  # others' text, quoted, in the page's line
                return f"\u201c{visible(wording.one_line(option.label))}\u201d"
    return "the option you chose"


def _who(asker: dto.AskerOut | None) -> str:
    return wording.who(None if asker is None else asker.model_dump())


def _asked_by_agent(service: Service, token: str | None, cancel: dict[str, Any]) -> bool:
    """Whether the question just cancelled was an agent's (SPEC P3): its receipt, unlike an
    answer's, does not tell."""
    with contextlib.suppress(ClankieError):
        shown = _snapshot(service, token, str(cancel.get("conversation_id")),
                          str(cancel.get("request_id"))).request
        return shown is not None and shown.asker is not None
    return False


def _zoned(stamp: str) -> str:
    """A time with its zone (H5), in the service's local time: `2026-12-01 23:47 CET`,
    or `UTC+05:30` where the zone has no short name."""
    at = when.parse(stamp).astimezone()
    name = at.strftime("%Z")
    if not re.fullmatch(r"[A-Z]{2,5}", name):
        offset = at.strftime("%z")
        name = f"UTC{offset[:3]}:{offset[3:]}" if offset else "UTC"
    return f"{when.local(stamp)} {name}"


def _folders(path: str) -> str:
    """A workspace as the owner tells it apart at a glance: its last two folders."""
    return "/".join([part for part in path.split("/") if part][-2:]) or path


def _snapshot(service: Service, token: str | None, conversation_id: str,
              request_id: str | None = None) -> dto.Snapshot:
    payload = {"conversation_id": conversation_id}
    if request_id is not None:
        payload["request_id"] = request_id
    return cast(dto.Snapshot, service.call("input_get", token, payload))


def _ended(question: dto.QuestionOut, me: str) -> str:
    receipt = question.receipt
    by = ""
    if receipt is not None and receipt.answered_by is not None:
        who = receipt.answered_by
        by = (" from this browser" if who.credential_id == me else
              " from the terminal (operator)" if who.kind == "operator" else
              " from another device")
    if question.status == "answered":
        return f"it was answered{by}"
    if question.status == "cancelled" and receipt is not None and receipt.reason == Reason.RESTART:
        return RESTARTED
    if question.status == "cancelled":
        return f"it was cancelled{by}"
    if question.status == "expired":
        return "it expired unanswered"
    reason = receipt.reason if receipt is not None and receipt.reason else "a reset"
    return f"it was invalidated ({reason})"


def _refused(service: Service, token: str | None, answer: Any,
             err: ClankieError) -> dict[str, str]:
    """A refused answer, cancel or take-control in words the owner can act on: a question
    that has ended says it ended and how; a want of the lease says to take control."""
    with contextlib.suppress(ClankieError, AttributeError, TypeError):
        if err.code in CONFLICTS | {Code.REQUEST_CLOSED} and isinstance(answer, dict):
            device = service.devices.device_status(token)
            shown = _snapshot(service, token, str(answer["conversation_id"]),
                              str(answer["request_id"])).request
            if shown is not None and shown.status != "pending":
                return {"outcome": "ended", "message": "Nothing was sent: this question had "
                        f"already ended ({_ended(shown, device.credential_id)})."}
        if err.code == Code.FORBIDDEN and token is not None:
            device = service.devices.device_status(token)
            if device.mode == "control" and device.lease_expires_at is None:
                return {"outcome": "refused", "message": 'Not sent: tap "Take control" '
                        "first, then answer again."}
            if device.mode == "read_only":
                return {"outcome": "refused", "message": "Not sent: this browser can only "
                        "look; it cannot answer or cancel."}
    return _refusal(err)


def _refusal(err: ClankieError) -> dict[str, str]:
    """A refusal in plain words (H5), never a bare code."""
    if err.code in CONFLICTS:
        return {"outcome": "conflict", "message": "The question changed since this page "
                "showed it, so nothing was sent. It is shown afresh: read it, then answer "
                "again if you still want to."}
    if err.code == Code.REQUEST_CLOSED:
        return {"outcome": "ended", "message": f"Nothing was sent: {err.detail}."}
    if err.code == Code.REQUEST_EXPIRED:
        return {"outcome": "expired", "message": f"Expired: {err.detail}."}
    if err.code == Code.UNAUTHENTICATED:
        return {"outcome": "revoked", "message": _session_refused(err)}
    if err.code == Code.FORBIDDEN:
        return {"outcome": "refused", "message": f"Refused: {err.detail}."}
    return {"outcome": "invalid", "message": f"Not sent: {err.detail}."}


# R9: a restart's ending in the words every surface says it in (`clankie.wording`)
RESTARTED: Final = f"it was {wording.RESTARTED_QUESTION} (on the computer)"
NOT_PAIRED: Final = ("This browser is not paired with clankie. On the computer, run clankie "
                     "devices pair --web and open the link it prints.")
PAIR_AGAIN: Final = ("This browser's pairing is not complete for this page: the page's own "
                     "half of it is missing or does not match (the browser's site data was "
                     "cleared or overwritten, it was paired at another address, each of "
                     "which keeps its own, or before clankie's page changed). To pair it "
                     "here, run clankie devices pair --web on the computer.")


def _session_refused(err: ClankieError) -> str:
    if err.code == Code.UNAUTHENTICATED:
        if err.detail in (NOT_PAIRED, PAIR_AGAIN):
            return err.detail
        return ("This browser is no longer paired (it was revoked, or its owner was). To "
                "pair it again, run clankie devices pair --web on the computer.")
    return err.detail


def _pairing_refused(err: ClankieError) -> str:
    if err.code == Code.UNAUTHENTICATED:
        return ("This pairing link is wrong, used or expired. If this browser was just "
                "paired with it, open clankie's page at / (the address without /pair). For "
                "a new link, run clankie devices pair --web on the computer again.")
    return err.detail


def _peer(request: Request) -> str | None:
    """Who is trying to pair (H2): the browser's connection, as the listener saw it.
    Wrong codes are limited per connection; this authenticates nobody."""
    client = request.client
    return None if client is None else f"web {client.host}:{client.port}"


def _form(body: bytes) -> dict[str, str]:
    try:
        fields = parse_qs(body.decode("utf-8"), max_num_fields=10, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        return {}
    return {k: v[0] for k, v in fields.items()}


def _asset(name: str) -> bytes:
    from importlib.resources import files

    return files("clankie.web").joinpath("static", name).read_bytes()

