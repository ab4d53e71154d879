"""SPEC H2-H5 at the HTTP level, on the page's own app over a real service and store:
every H4 rule (Host, Origin, CSRF, headers, cookie/bearer separation, nothing secret in
URLs or logs), pairing by POST only, and for every refusal that nothing happened."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import clankie.web
from clankie.core.errors import ClankieError
from clankie.service import Service
from clankie.settings import Settings
from clankie.web.app import SECURITY_HEADERS, create_web_app
from tests.world import World

LISTENER = "http://127.0.0.1:8765"
PHONE_ORIGIN = "https://laptop.tailnet-name.ts.net"


def page_client(world: World, base_url: str = LISTENER) -> TestClient:
    return TestClient(create_web_app(world.service, LISTENER), base_url=base_url,
                      follow_redirects=False)


def csrf_in(html: str) -> str:
    """The pairing form's CSRF token."""
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, html
    return found.group(1)


def paired(world: World, client: TestClient, mode: str = "control",
           origin: str = LISTENER) -> str:
    """Pair `client` as a browser does; the page's key (H3), which the page's script keeps
    and sends in X-Clankie-Key with every request, as `client` now does."""
    code = world.call("device_pair_start", {"name": "phone", "mode": mode})["code"]
    form = client.get(f"/pair?code={code}")
    done = client.post("/pair", data={"code": code, "csrf": csrf_in(form.text)},
                       headers={"Origin": origin})
    assert done.status_code == 200 and done.json()["outcome"] == "paired", done.text
    key = str(done.json()["key"])
    client.headers["X-Clankie-Key"] = key
    return key


def asked(world: World) -> tuple[str, dict[str, Any]]:
    c = world.conversation()
    snap = world.ask(c)
    return c, snap


def binding(c: str, world: World) -> dict[str, Any]:
    snap = world.snapshot(c)
    q = snap["pending"]
    return {"conversation_id": c, "request_id": q["request_id"],
            "incarnation": snap["incarnation"], "revision": snap["revision"],
            "option_id": q["options"][0]["option_id"]}


def words(reply: dict[str, Any]) -> dict[str, Any]:
    """A page reply's words (issue 42: its data beside them is tests/web/test_page_json.py's)."""
    return {k: reply[k] for k in ("outcome", "message")}


def still_pending(world: World, c: str) -> bool:
    return world.snapshot(c)["pending"] is not None


def devices(world: World) -> list[dict[str, Any]]:
    return [x for x in world.call("credential_list")["credentials"] if x["kind"] == "device"]


# --------------------------------------------------------------------------- pairing (H2)


def test_h2_a_get_never_pairs_and_a_post_pairs_then_leaves_the_code_out_of_the_url(
        world: World):
    code = world.call("device_pair_start", {"name": "phone"})["code"]
    with page_client(world) as client:
        for _ in range(3):
            shown = client.get(f"/pair?code={code}")
            assert shown.status_code == 200 and "Pair this browser as phone?" in shown.text
        assert devices(world) == [] and "set-cookie" not in shown.headers
        done = client.post("/pair", data={"code": code, "csrf": csrf_in(shown.text)},
                           headers={"Origin": LISTENER})
        assert (done.status_code, done.json()["outcome"]) == (200, "paired")
        assert "location" not in done.headers  # the page's script goes to "/" itself
    assert len(devices(world)) == 1


def test_h2_wrong_used_and_expired_codes_are_refused_alike_on_the_page(world: World):
    used = world.call("device_pair_start", {"name": "a"})["code"]
    expired = world.call("device_pair_start", {"name": "b"})["code"]
    with page_client(world) as client:
        paired_form = client.get(f"/pair?code={used}")
        client.post("/pair", data={"code": used, "csrf": csrf_in(paired_form.text)},
                    headers={"Origin": LISTENER})
        world.clock.advance(600)
        shown = {client.get(f"/pair?code={code}").text for code in (used, expired, "A" * 32)}
    assert len(shown) == 1 and "wrong, used or expired" in shown.pop()
    assert [d["name"] for d in devices(world)] == ["a"]


def test_h2_opening_wrong_pairing_links_never_locks_the_owner_out(world: World):
    """Red team (issue 21): GETs of wrong codes counted as failed attempts, so any web page
    open in the owner's browser (`<img src=".../pair?code=guess">`) could keep pairing
    locked. Opening a link pairs nothing and guesses nothing worth counting (192-bit
    codes): only a pairing that fails counts (H2)."""
    good = world.call("device_pair_start", {"name": "phone"})["code"]
    with page_client(world) as client:
        for n in range(12):
            assert client.get(f"/pair?code=wrong{n}").status_code == 401
        shown = client.get(f"/pair?code={good}")
        assert shown.status_code == 200 and "Pair this browser as phone?" in shown.text


def test_h2_failed_pairings_elsewhere_never_stop_the_page_pairing(world: World):
    """Issue 30: six wrong codes a minute from anyone on a `--tcp` port locked pairing
    for everyone. No lockout: a valid code pairs whatever others sent."""
    good = world.call("device_pair_start", {"name": "phone"})["code"]
    for _ in range(20):  # failed pairings (from a local process on /v1/ops, say)
        with pytest.raises(ClankieError):
            world.service.call("device_pair_finish", None, {"code": "wrong"},
                               peer="tcp 127.0.0.1:40000")
    with page_client(world) as client:
        form = client.get(f"/pair?code={good}")
        assert form.status_code == 200 and "Pair this browser as phone?" in form.text
        done = client.post("/pair", data={"code": good, "csrf": csrf_in(form.text)},
                           headers={"Origin": LISTENER})
        assert done.json()["outcome"] == "paired", done.text
    assert [d["name"] for d in devices(world)] == ["phone"]


def test_h2_the_page_limits_wrong_codes_per_connection_and_a_valid_one_still_pairs(
        world: World):
    used = world.call("device_pair_start", {"name": "a"})["code"]
    later = world.call("device_pair_start", {"name": "b"})["code"]
    with page_client(world) as client:
        forms = {code: csrf_in(client.get(f"/pair?code={code}").text) for code in (used, later)}
        again = {"code": used, "csrf": forms[used]}
        client.post("/pair", data=again, headers={"Origin": LISTENER})
        statuses = [client.post("/pair", data=again, headers={"Origin": LISTENER})
                    for _ in range(6)]
        assert [r.status_code for r in statuses] == [401] * 5 + [403]
        assert "too many wrong pairing codes" in statuses[-1].json()["message"]
        assert all("set-cookie" not in r.headers for r in statuses)
        assert [d["name"] for d in devices(world)] == ["a"]  # the refusals made nothing
        done = client.post("/pair", data={"code": later, "csrf": forms[later]},
                           headers={"Origin": LISTENER})
        assert done.json()["outcome"] == "paired", done.text
    assert [d["name"] for d in devices(world)] == ["a", "b"]


def test_h2_the_page_pairing_keeps_the_browsers_user_agent(world: World):
    code = world.call("device_pair_start", {"name": "phone"})["code"]
    ua = "Mozilla/5.0 (Linux; Android 14) Chrome/156.0.0.0 Mobile Safari/537.36"
    with page_client(world) as client:
        form = client.get(f"/pair?code={code}")
        client.post("/pair", data={"code": code, "csrf": csrf_in(form.text)},
                    headers={"Origin": LISTENER, "User-Agent": ua})
    assert [d["user_agent"] for d in devices(world)] == [ua]


def test_h2_a_pairing_post_needs_the_page_origin_and_its_csrf_token(world: World):
    code = world.call("device_pair_start", {"name": "phone"})["code"]
    with page_client(world) as client:
        token = csrf_in(client.get(f"/pair?code={code}").text)
        for headers, form in [({}, {"code": code, "csrf": token}),
                              ({"Origin": "https://evil.example"}, {"code": code, "csrf": token}),
                              ({"Origin": LISTENER}, {"code": code}),
                              ({"Origin": LISTENER}, {"code": code, "csrf": "0" * 64}),
                              # a 500 before (hmac of non-ASCII text; red team, issue 21)
                              ({"Origin": LISTENER}, {"code": code, "csrf": "é"})]:
            refused = client.post("/pair", data=form, headers=headers)
            assert refused.status_code == 403 and "set-cookie" not in refused.headers
    assert devices(world) == []


# ---------------------------------------------------------------------------- cookie (H3)


def test_h3_the_cookie_is_httponly_samesite_lax_path_root_and_not_secure_on_http(
        world: World):
    code = world.call("device_pair_start", {"name": "phone"})["code"]
    with page_client(world) as client:
        form = client.get(f"/pair?code={code}")
        done = client.post("/pair", data={"code": code, "csrf": csrf_in(form.text)},
                           headers={"Origin": LISTENER})
    cookie = done.headers["set-cookie"]
    assert {"HttpOnly", "Path=/", "SameSite=lax"} <= {p.strip() for p in cookie.split(";")}
    assert "Secure" not in cookie


def test_h3_the_cookie_is_secure_when_web_origin_is_https(make_world: Callable[..., World]):
    world = make_world(Settings(web_origin=PHONE_ORIGIN))
    code = world.call("device_pair_start", {"name": "phone"})["code"]
    with page_client(world, PHONE_ORIGIN) as client:
        form = client.get(f"/pair?code={code}")
        done = client.post("/pair", data={"code": code, "csrf": csrf_in(form.text)},
                           headers={"Origin": PHONE_ORIGIN})
        assert done.status_code == 200, done.text
        assert client.get("/").status_code == 200
    cookie = done.headers["set-cookie"]
    assert cookie.startswith("__Host-clankie=")
    assert {"HttpOnly", "Path=/", "SameSite=lax", "Secure"} <= {
        p.strip() for p in cookie.split(";")}


def test_h3_the_page_never_accepts_a_bearer_token(world: World):
    c, _ = asked(world)
    with page_client(world) as client:
        bearer = {"Authorization": f"Bearer {world.operator}"}
        assert client.get("/", headers=bearer).status_code == 400
        assert client.get(f"/view?c={c}", headers=bearer).status_code == 400
        answer = client.post("/api/answer", json=binding(c, world),
                             headers=bearer | {"Origin": LISTENER})
        assert answer.status_code == 400
    assert still_pending(world, c)


# ------------------------------------------------------------------ hostile browsers (H4)


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1:9999", "localhost:8765",
                                  "laptop.tailnet-name.ts.net"])
def test_h4_a_wrong_host_is_refused_before_anything_happens(world: World, host: str):
    c, _ = asked(world)
    with page_client(world) as client:
        csrf = paired(world, client)
        before = devices(world)
        for method, path, body in [("GET", "/", None), ("GET", f"/view?c={c}", None),
                                   ("POST", "/api/answer", binding(c, world)),
                                   ("POST", "/api/take-control", {})]:
            response = client.request(method, path, json=body, headers={
                "Host": host, "Origin": LISTENER, "X-Clankie-Key": csrf})
            assert response.status_code == 421, (path, response.text)
    assert still_pending(world, c)
    assert devices(world) == before and not before[0]["holds_lease"]


def test_h4_web_origins_host_is_allowed(make_world: Callable[..., World]):
    world = make_world(Settings(web_origin=PHONE_ORIGIN))
    with page_client(world) as client:
        assert client.get("/view", headers={"Host": "laptop.tailnet-name.ts.net"}
                          ).status_code == 401  # reached the page: not paired


@pytest.mark.parametrize("origin", [None, "https://evil.example", "null",
                                    "http://127.0.0.1:8766"])
def test_h4_a_state_change_without_the_pages_origin_changes_nothing(world: World,
                                                                    origin: str | None):
    c, _ = asked(world)
    with page_client(world) as client:
        csrf = paired(world, client)
        headers = {"X-Clankie-Key": csrf} | ({"Origin": origin} if origin else {})
        for action, body in [("take-control", {}), ("answer", binding(c, world)),
                             ("cancel", binding(c, world))]:
            refused = client.post(f"/api/{action}", json=body, headers=headers)
            assert (refused.status_code, refused.json()["outcome"]) == (403, "refused")
    assert still_pending(world, c) and not devices(world)[0]["holds_lease"]


def test_h4_a_state_change_needs_this_browsers_key(world: World):
    """The page's key is its CSRF token too: a cross-site request cannot set the header,
    and another browser's key is not this one's."""
    c, _ = asked(world)
    with page_client(world) as other:
        others_csrf = paired(world, other)
    with page_client(world) as client:
        paired(world, client)
        del client.headers["X-Clankie-Key"]
        for token in (None, "", others_csrf, "0" * 64, "\xe9"):
            headers = {"Origin": LISTENER} | ({"X-Clankie-Key": token.encode("latin-1")}
                                              if token is not None else {})
            for action, body in [("take-control", {}), ("answer", binding(c, world))]:
                refused = client.post(f"/api/{action}", json=body, headers=headers)
                assert refused.status_code == 401, refused.text
    assert still_pending(world, c)
    assert not any(d["holds_lease"] for d in devices(world))


def test_h4_proxy_headers_never_authenticate(world: World):
    c, _ = asked(world)
    proxy = {"X-Forwarded-For": "100.64.0.1", "X-Forwarded-User": "owner",
             "Tailscale-User-Login": "owner@example.com", "Tailscale-User-Name": "Owner",
             "Origin": LISTENER}
    with page_client(world) as client:
        shell = client.get("/", headers=proxy)  # the shell, which holds nothing of anyone's
        assert shell.status_code == 200 and c not in shell.text
        assert client.get(f"/view?c={c}", headers=proxy).status_code == 401
        refused = client.post("/api/answer", json=binding(c, world), headers=proxy)
        assert refused.status_code in (401, 403)
    assert still_pending(world, c)


def test_h4_every_response_carries_the_security_headers(world: World):
    c, _ = asked(world)
    code = world.call("device_pair_start", {"name": "x"})["code"]
    with page_client(world) as client:
        responses = [client.get("/"), client.get(f"/pair?code={code}"),
                     client.get("/pair?code=wrong"), client.get("/static/page.js"),
                     client.get("/static/page.css"), client.get("/static/nope.js"),
                     client.get("/nowhere"), client.get("/", headers={"Host": "evil"}),
                     client.get("/", headers={"Authorization": "Bearer x"}),
                     client.post("/api/answer", json={})]
        csrf = paired(world, client)
        responses += [client.get("/"), client.get(f"/view?c={c}"),
                      client.get(f"/api/events?c={c}&after=999999"),
                      client.post("/api/take-control", json={},
                                  headers={"Origin": LISTENER, "X-Clankie-Key": csrf}),
                      client.put("/api/answer")]
    for response in responses:
        for name, value in SECURITY_HEADERS.items():
            assert response.headers.get(name) == value, (response.url, name)
    csp = SECURITY_HEADERS["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    assert SECURITY_HEADERS["referrer-policy"] == "no-referrer"
    assert SECURITY_HEADERS["cache-control"] == "no-store"


def test_h4_the_page_has_no_inline_script_and_loads_only_its_own_assets(world: World):
    with page_client(world) as client:
        paired(world, client)
        html = client.get("/").text
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/static/page.js" defer>']
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html)
    assert not re.search(r"\son[a-z]+\s*=", html)  # no inline event handlers either
    assert "javascript:" not in html


def test_h6_the_page_looks_again_at_least_every_second():
    """H6's 2 s: a revocation or an expiry writes no event, so the page's long-poll must
    come back (and the view be read again) within a second, whatever happens."""
    from clankie.web.views import LONG_POLL_MS

    assert LONG_POLL_MS <= 1_000
    script = (Path(clankie.web.__file__).parent / "static" / "page.js").read_text()
    assert "/api/events?" in script and "await refresh()" in script


def test_h4_no_token_code_or_answer_text_reaches_the_log(world: World,
                                                         caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG)
    c = world.conversation()
    world.ask(c, {"kind": "text", "prompt": "Name the file?"})
    code = world.call("device_pair_start", {"name": "phone"})["code"]
    secret = "my secret answer 7f3a"
    with page_client(world) as client:
        form = client.get(f"/pair?code={code}")
        done = client.post("/pair", data={"code": code, "csrf": csrf_in(form.text)},
                           headers={"Origin": LISTENER})
        token = done.headers["set-cookie"].split(";")[0].split("=", 1)[1]
        csrf = done.json()["key"]
        client.headers["X-Clankie-Key"] = csrf
        client.post("/api/take-control", json={}, headers={"Origin": LISTENER,
                                                           "X-Clankie-Key": csrf})
        snap = world.snapshot(c)
        reply = client.post("/api/answer", headers={"Origin": LISTENER, "X-Clankie-Key": csrf},
                            json={"conversation_id": c,
                                  "request_id": snap["pending"]["request_id"],
                                  "incarnation": snap["incarnation"],
                                  "revision": snap["revision"], "text": secret})
        assert reply.json()["outcome"] == "accepted"
        client.get("/pair?code=wrong-code-xyz")
    # the service's and the server's loggers (the test's own HTTP client logs its URLs)
    logged = "\n".join(r.getMessage() for r in caplog.records
                       if r.name.startswith(("clankie", "uvicorn", "starlette", "fastapi")))
    for text in (token, code, secret, csrf, "wrong-code-xyz"):
        assert text not in logged


# ------------------------------------------------------------------------ answering (H5)


def test_h5_outcomes_in_words_accepted_duplicate_conflict(world: World):
    c, _ = asked(world)
    with page_client(world) as client:
        csrf = paired(world, client)
        headers = {"Origin": LISTENER, "X-Clankie-Key": csrf}
        body = binding(c, world)
        refused = client.post("/api/answer", json=body, headers=headers)
        assert refused.json()["outcome"] == "refused"  # A1: no lease yet
        assert '"Take control" first' in refused.json()["message"]
        assert still_pending(world, c)
        taken = client.post("/api/take-control", json={}, headers=headers)
        assert taken.json()["outcome"] == "control"
        accepted = client.post("/api/answer", json=body, headers=headers).json()
        assert words(accepted) == {"outcome": "accepted", "message":
                                   "Accepted: \u201cpytest\u201d. Clankie has not necessarily run "
                                   "yet."}
        again = client.post("/api/answer", json=body, headers=headers).json()
        assert again["outcome"] == "duplicate"
        other = dict(body, option_id=world.snapshot(c, body["request_id"])["request"][
            "options"][1]["option_id"])
        conflict = client.post("/api/answer", json=other, headers=headers).json()
        assert words(conflict) == {"outcome": "ended", "message": "Nothing was sent: this "
                                   "question had already ended (it was answered from this "
                                   "browser)."}
        world.ask(c)
        stale = dict(binding(c, world), revision=binding(c, world)["revision"] - 1)
        changed = client.post("/api/answer", json=stale, headers=headers).json()
        assert changed["outcome"] == "conflict" and "afresh" in changed["message"]
        assert still_pending(world, c)


def test_h5_a_read_only_browser_sees_the_question_and_no_controls_and_is_refused(
        world: World):
    c, snap = asked(world)
    with page_client(world) as client:
        csrf = paired(world, client, mode="read_only")
        html = client.get(f"/view?c={c}").text
        assert snap["pending"]["prompt"] in html
        assert 'id="answer"' not in html and "data-option" not in html
        assert "Take control" not in html
        refused = client.post("/api/answer", json=binding(c, world),
                              headers={"Origin": LISTENER, "X-Clankie-Key": csrf})
        assert refused.json()["outcome"] == "refused"
    assert still_pending(world, c)


def test_h5_a_revoked_browser_is_told_and_refused(world: World):
    c, _ = asked(world)
    with page_client(world) as client:
        csrf = paired(world, client)
        world.call("credential_revoke", {"credential_id": devices(world)[0]["credential_id"]})
        assert client.get(f"/view?c={c}").json()["outcome"] == "revoked"
        assert client.get(f"/api/events?c={c}").json()["outcome"] == "revoked"
        refused = client.post("/api/take-control", json={},
                              headers={"Origin": LISTENER, "X-Clankie-Key": csrf})
        assert refused.json()["outcome"] == "revoked"
    assert not devices(world)[0]["holds_lease"]


def test_h5_expired_and_cancelled_are_said_in_words(world: World):
    c, _ = asked(world)
    with page_client(world) as client:
        csrf = paired(world, client)
        headers = {"Origin": LISTENER, "X-Clankie-Key": csrf}
        client.post("/api/take-control", json={}, headers=headers)
        body = binding(c, world)
        cancel = {k: v for k, v in body.items() if k != "option_id"}
        cancelled = client.post("/api/cancel", json=cancel, headers=headers).json()
        assert cancelled["outcome"] == "accepted" and cancelled["message"].startswith(
            "Cancelled.")
        assert not still_pending(world, c)
        again = world.ask(c)
        world.clock.advance(world.service.settings.question_ttl + 1)
        client.post("/api/take-control", json={}, headers=headers)
        late = client.post("/api/answer", headers=headers, json={
            "conversation_id": c, "request_id": again["pending"]["request_id"],
            "incarnation": again["incarnation"], "revision": again["revision"],
            "option_id": again["pending"]["options"][0]["option_id"]}).json()
        assert (late["outcome"], late["message"].split(":")[0]) == ("expired", "Expired"), late


def test_h6_odd_cursors_on_the_events_endpoint_are_never_a_500(world: World):
    """Red team (issue 21): `after=²` (a digit to str.isdigit, not to int) and 4,301
    digits were 500s; any `after` that is no cursor reads from the start."""
    c, _ = asked(world)
    with page_client(world) as client:
        paired(world, client)
        for after in ("%C2%B2", "9" * 4_301, "-1", "1e3", str(2**63)):
            got = client.get(f"/api/events?c={c}&after={after}")
            assert got.status_code == 200, (after, got.status_code, got.text)


def test_h5_text_from_others_on_the_page_is_escaped_and_visible(world: World):
    """Red team (issue 21): the page showed a prompt's bidi controls raw (`\\u202eTIM` looks
    like "MIT"), where the CLI and the TUI show them as escapes (SPEC section 10 "Text from
    others"); markup is escaped as ever."""
    c = world.conversation()
    world.ask(c, {"kind": "choice", "prompt": "License <script>alert(1)</script>?",
                  "options": [{"label": "MIT"}, {"label": "\u202eTIM"}]})
    with page_client(world) as client:
        paired(world, client)
        shown = client.get(f"/view?c={c}").text
    assert "\u202e" not in shown and "\\u202eTIM" in shown
    assert "<script>alert" not in shown and "&lt;script&gt;alert(1)&lt;/script&gt;" in shown


# ------------------------------------------------------------ the two halves (H3, H7)


def test_h3_the_cookie_alone_reads_and_changes_nothing(world: World):
    """Issue 30's attack: browsers send the cookie to every port of the host, so a server on
    another port received `clankie=clk_...`, fetched the page's CSRF token with it, and took
    control. The HTML a navigation loads now carries no user data, and every request for
    data or a change needs the page's key too, which only the page that paired holds."""
    c, snap = asked(world)
    prompt = snap["pending"]["prompt"]
    with page_client(world) as phone:
        paired(world, phone)
        cookie = phone.cookies["clankie"]
    with page_client(world) as thief:  # the cookie replayed, as another port's server can
        thief.cookies.set("clankie", cookie)
        shell = thief.get(f"/?c={c}")
        assert shell.status_code == 200 and prompt not in shell.text
        assert c not in shell.text and "phone" not in shell.text
        for response in [thief.get(f"/view?c={c}"), thief.get(f"/api/events?c={c}"),
                         thief.post("/api/take-control", json={},
                                    headers={"Origin": LISTENER}),
                         thief.post("/api/answer", json=binding(c, world),
                                    headers={"Origin": LISTENER,
                                             "X-Clankie-Key": "0" * 64})]:
            assert response.status_code == 401, response.text
            assert prompt not in response.text
    assert still_pending(world, c)
    with world.store.read() as tx:
        assert tx.lease() is None  # no control was taken


def test_h3_the_cookie_is_lax_so_a_tap_on_answer_url_from_another_app_carries_it(
        world: World):
    """H3, H7: a navigation that starts on another site (a notification's link) carries a
    `SameSite=Lax` cookie, never a `Strict` one; the shell then asks for the view."""
    with page_client(world) as client:
        code = world.call("device_pair_start", {"name": "phone"})["code"]
        form = client.get(f"/pair?code={code}")
        done = client.post("/pair", data={"code": code, "csrf": csrf_in(form.text)},
                           headers={"Origin": LISTENER})
    parts = {p.strip() for p in done.headers["set-cookie"].split(";")}
    assert {"HttpOnly", "Path=/", "SameSite=lax"} <= parts
    assert not [p for p in parts if p.lower().startswith("domain=")]


def test_h3_the_page_still_answers_after_a_restart_without_a_reload(make_world: Any):
    """Issue 30: after a restart an open page was refused "lacks the page's CSRF token"
    (a new secret each start). The key comes from the store's page key: the same after a
    restart, so the page's next request is accepted as before."""
    world = make_world()
    c, _ = asked(world)
    with page_client(world) as before:
        key = paired(world, before)
        cookie = before.cookies["clankie"]
    world.service = Service(world.store, world.service.settings, clock=world.clock)
    with page_client(world) as after:  # a new service and app on the same store
        after.cookies.set("clankie", cookie)
        after.headers["X-Clankie-Key"] = key
        took = after.post("/api/take-control", json={}, headers={"Origin": LISTENER})
        assert took.status_code == 200, took.text
        done = after.post("/api/answer", json=binding(c, world), headers={"Origin": LISTENER})
        assert done.json()["outcome"] == "accepted", done.text
    assert not still_pending(world, c)


def test_h3_a_browser_without_the_pages_key_is_told_to_pair_again(world: World):
    """A browser paired before the key (its cookie only), or at another address of the
    page (each origin keeps its own storage): told in words to pair here again, and nothing
    is shown or changed."""
    c, _ = asked(world)
    with page_client(world) as client:
        paired(world, client)
        del client.headers["X-Clankie-Key"]
        got = client.get(f"/view?c={c}")
        assert got.status_code == 401
        assert "pair it here" in got.json()["message"]
        took = client.post("/api/take-control", json={}, headers={"Origin": LISTENER})
        assert took.status_code == 401 and "pair it here" in took.json()["message"]
    with page_client(world) as stranger:
        got = stranger.get(f"/view?c={c}")
        assert got.status_code == 401 and "not paired" in got.json()["message"]
    assert still_pending(world, c)
