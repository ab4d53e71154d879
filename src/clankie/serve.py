"""`clankie serve`: the daemon that starts both listeners, the dispatcher's (`api/`) and the
phone page's (`web/`), from above both: `api/` never imports the page, and neither
imports this.

Owns start-up and shut-down: one server per home (a lock file), every socket bound and
listening before start-up recovery runs (a port someone else took while the service was
down stops `serve` before recovery has changed anything, T2), start-up recovery before any
request is read or any run starts (R3), the service built once its sockets are bound (so
it is given the page's address, `web_url`, at construction), the socket created with mode
0600, and a clean stop on SIGTERM or SIGINT (in-flight requests finish, long-polls are
woken, the store is closed). The HTTP layer (FastAPI, uvicorn: a fifth of a second to
import) is imported while recovery runs in SQLite on another thread, so a restart after a
crash is ready sooner. What only a run or the phone page needs is not loaded before the
service answers (issue 31, SPEC section 10: ready within 1 s): runs are executed in a
process of their own (`service.runner`, issue 39), started once the service is ready, and
the page is made at its first request (`page_when_asked`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import ipaddress
import logging
import os
import re
import resource
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clankie.agent.providers import ProviderError, model_for_runs, model_in_use
from clankie.agent.scripted import ScriptError, load_script
from clankie.agent.sdk import DEFAULT_URLS, KEY_VARIABLES, base_url
from clankie.api import logs
from clankie.home import LOG, Home, check, open_lock
from clankie.service import Service
from clankie.service.base import has_owner
from clankie.service.notify import Notifier
from clankie.service.runner import Runner
from clankie.service.runs import Runs
from clankie.settings import Settings
from clankie.store import Store

log = logging.getLogger("clankie.serve")


class ServeError(Exception):
    """Why the service cannot start; said to the user as it is."""


class ServeUsage(ServeError):
    """An argument `serve` cannot use: usage or invalid input (exit 2), said before the home
    or the store is touched."""


@contextlib.contextmanager
def serve_lock(home: Home) -> Iterator[None]:
    """Hold the home's lock for the life of the server; a second server is refused. The
    lock file is opened without following a link (T1), and emptied only once held."""
    fd = open_lock(home)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise ServeError(f"another `clankie serve` (pid {holder}) is already serving "
                             f"{home.path}; stop it first") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def unix_socket(path: Path) -> socket.socket:
    path.unlink(missing_ok=True)  # a stale socket of a stopped server; we hold the lock
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket file is born 0600: no moment when others could connect
    try:
        sock.bind(str(path))
        os.chmod(path, 0o600)
        sock.listen(128)
    except OSError as exc:  # a path too long for a socket, say
        sock.close()
        raise ServeError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old)
    return sock


def parse_tcp(address: str, option: str = "--tcp") -> tuple[str, int]:
    """`--tcp HOST:PORT` (or `--web`, H1): a loopback host (an IPv6 one in brackets, as in a
    URL) and a port from 1 to 65535, or 0 for any free one; anything else is a `ServeUsage`."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not host:
        raise ServeUsage(f"{option} takes a loopback HOST:PORT, as in 127.0.0.1:18900 or "
                         f"[::1]:18900, not {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not re.fullmatch(r"[0-9]{1,5}", port_text) or int(port_text) > 65535:
        raise ServeUsage(f"{option} takes a PORT from 1 to 65535 (or 0: any free port), not "
                         f"{address!r}")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ServeUsage(f"{option} serves only on a loopback address (127.0.0.1, [::1] or "
                         f"localhost), not {address!r}")
    return host, int(port_text)


def tcp_socket(address: str) -> socket.socket:
    host, port = parse_tcp(address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:  # listening, not only bound: with SO_REUSEADDR a bound port can still be taken
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        held = (f"; see who holds it: `ss -ltnp 'sport = :{port}'`"
                if exc.errno == errno.EADDRINUSE else "")
        raise ServeError(f"cannot listen on {address}: {exc.strerror}{held}") from None
    return sock


def http_url(sock: socket.socket) -> str:
    """The URL of a TCP listener as CLANKIE_URL takes it (an IPv6 host in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


SWITCH_INTERVAL_S = 0.0005
SPARE_DESCRIPTORS = 256  # the store, its readers, run threads' pipes, Git's children


def descriptors_for(max_connections: int, listeners: int) -> None:
    """Make sure every listener can hold `max_connections` at once and the service still
    has descriptors of its own (V5: a full TCP listener must never starve the Unix socket
    by taking the last descriptor): raise the soft limit as far as needed, or refuse."""
    needed = max_connections * listeners + SPARE_DESCRIPTORS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise ServeError(f"max_connections {max_connections} on {listeners} listener(s) "
                             f"needs {needed} file descriptors, and this process may open "
                             f"{hard}: lower max_connections or raise the limit (ulimit -n)")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def serve(home: Home, settings: Settings, tcp: str | None = None,
          script: Path | None = None, web: str | None = None) -> None:
    # T1: nothing in a home someone else could have changed is used; and one the service
    # cannot write in (read-only, permissions) is refused before anything is opened
    check(home, write=True)
    if not home.store.exists():
        raise ServeError(f"{home.path} has no clankie store; run `clankie init` first")
    descriptors_for(settings.max_connections, 1 + bool(tcp) + bool(web))
    try:
        logs.setup(home.path / LOG)
    except logs.LogRefused as exc:
        raise ServeError(str(exc)) from None
    # A request thread waiting for the GIL behind a busy run thread would wait up to the
    # default 5 ms switch interval: answers are latency-bound, runs are not.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    with serve_lock(home):
        store = Store(home.store)
        sockets: list[socket.socket] = []
        try:
            if not has_owner(store):
                raise ServeError("this home has no owner; run `clankie init` first")
            try:
                document = load_script(script) if script is not None else None
                model_for_runs(settings, document)  # refused now, not at the first run
            except (ProviderError, ScriptError) as exc:
                raise ServeError(str(exc)) from None
            # Listen first: an address that cannot be had (another user's listener on the
            # port, T2) stops start-up while the store is as the last server left it. The
            # TCP port first, since only it can be taken by someone else; a client that
            # connects meanwhile waits in the listen queue until recovery is done.
            if tcp:
                sockets.append(tcp_socket(tcp))
            web_socket = tcp_socket(web) if web else None
            if web_socket is not None:
                sockets.append(web_socket)
            sockets.insert(0, unix_socket(home.socket))  # first: the ready line says so
            listener = http_url(web_socket) if web_socket is not None else None
            # Nothing runs before recovery: the executor starts a run only when one is
            # queued after it, and the notifier a hook only after a commit that asks. The
            # page is reached at `web_origin`, or at its listener's own address (H1).
            runners: list[Runner] = []

            def runner(runs: Runs) -> Runner:
                runners.append(Runner(runs, settings, document))
                return runners[0]

            service = Service(store, settings, executor=runner,
                              notifier=(Notifier(settings.notify_command)
                                        if settings.notify_command else None),
                              web_url=(settings.web_origin or listener) if listener else None)
            # R3 before any run starts or any request is read. Its statements run in
            # SQLite without the GIL, so the HTTP layer is imported meanwhile.
            with ThreadPoolExecutor(1, thread_name_prefix="clankie-recovery") as pool:
                recovering = pool.submit(service.runs.recover)
                from clankie.api import app as http
                recovery = recovering.result()
            log.info("start-up recovery: %d pending question(s) cancelled, %d run(s) failed",
                     recovery.cancelled_questions, recovery.failed_runs)
            page = None
            if web_socket is not None and listener is not None:
                page = (tuple(web_socket.getsockname()[:2]), page_when_asked(service, listener))
            server = http.http_server(service, page)
            # A stop signal that arrives before uvicorn has installed its own handlers (the
            # ready line is printed first) must still stop it; and uvicorn re-raises the
            # signal it caught once it has stopped, which then changes nothing, so a clean
            # stop exits 0.
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, server.handle_exit)
            where = [f"unix://{home.socket}"] + [http_url(s) for s in sockets[1:]
                                                  if s is not web_socket]
            said_web = f"; the phone page on {http_url(web_socket)}" if web_socket else ""
            print(f"clankie serving on {' and '.join(where)} with the {settings.model} model"
                  f"{_model_said(settings, script)}{said_web}", file=sys.stderr, flush=True)
            # Ready for the first run without making it wait for the run process.
            threading.Thread(target=runners[0].warm, daemon=True, name="clankie-warm").start()
            service.start_checkpoints()
            # What start-up made lives as long as the process: the collector need not walk
            # it again, in each collection nor at exit (a stop is 0.1 s quicker).
            gc.freeze()
            try:
                server.run(sockets=sockets)
            finally:
                service.stop(timeout=5)
        finally:
            for sock in sockets:
                sock.close()
            home.socket.unlink(missing_ok=True)
            store.close()
    log.info("clankie stopped")


def page_when_asked(service: Service, listener: str) -> Any:
    """The phone page's app (H1), made at its first request, on a worker thread, once
    however many browsers ask at the same moment: its templates and routes are nothing the
    dispatcher needs, so `serve` answers before it imports them (issue 31)."""
    lock = threading.Lock()
    made: list[Any] = []

    def make() -> Any:
        with lock:
            if not made:
                from clankie.web.app import create_web_app

                made.append(create_web_app(service, listener))
            return made[0]

    async def page(scope: Any, receive: Any, send: Any) -> None:
        import anyio

        app = made[0] if made else await anyio.to_thread.run_sync(make)
        await app(scope, receive, send)

    return page


def _model_said(settings: Settings, script: Path | None = None) -> str:
    """` (NAME at HOST)` for a real model, and a warning when its key variable is not in
    this environment, the one runs take it from: said at start, before a first run fails
    401 (`doctor` asks with its own environment's key, which it cannot compare). The
    scripted model without a script is said to say nothing, and how to give it one."""
    model = model_in_use(settings)
    if model.provider not in KEY_VARIABLES:
        return "" if script is not None else (
            " and no script, so Clankie will not reply; give one with `clankie serve "
            "--script FILE` (docs/cli.md, \"Scripted conversations\") or choose a real model")
    said = f" ({model.model} at {model.endpoint_host})"
    variable = KEY_VARIABLES[model.provider]
    if os.environ.get(variable):
        return said
    if model.provider == "openai" and base_url(settings, "openai") != DEFAULT_URLS["openai"]:
        return (f"{said}; {variable} is not set here, so a placeholder key is sent: fine for "
                "a server started without a key")
    return (f"{said}; {variable} is not set in this environment: runs will fail until "
            f"`clankie serve` is restarted with it")
