"""Issue 19, red team (F2, F3, NaN): what a hostile or foreign JSON service answers never
gets past the client as a result clankie did not send, nor as an exception other than the
client's own (`NotClankie`, `BadServiceUrl`). Peers are scripted Unix sockets (the shared
`ScriptedPeer` of test_client_wire)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from clankie import dto
from clankie.client import ApiError, AsyncClient, BadServiceUrl, Client, NotClankie
from tests.api.test_client_wire import HangUpAfter, reply


def fitted_sync(url: str, op: str) -> Any:
    with Client(url, "clk_x", fit=True) as client:
        return client.call(op, {"conversation_id": "c"})


def fitted_async(url: str, op: str) -> Any:
    async def run() -> Any:
        async with AsyncClient(url, "clk_x", fit=True) as client:
            return await client.call(op, {"conversation_id": "c"})
    return asyncio.run(run())


def typed_sync(url: str, op: str) -> Any:
    with Client(url, "clk_x") as client:
        spec = dto.OPS[op]
        return client.op(spec, spec.input.model_construct(conversation_id="c"))


def typed_async(url: str, op: str) -> Any:
    async def run() -> Any:
        async with AsyncClient(url, "clk_x") as client:
            spec = dto.OPS[op]
            return await client.op(spec, spec.input.model_construct(conversation_id="c"))
    return asyncio.run(run())


WAYS = pytest.mark.parametrize("way", [fitted_sync, fitted_async, typed_sync, typed_async])
MISFITS = {
    "empty-object": b"{}",
    "pending-not-an-object": (b'{"conversation_id":"c","incarnation":"i","revision":1,'
                              b'"pending":7,"request":null}'),
    "revision-a-string": (b'{"conversation_id":"c","incarnation":"i","revision":"1",'
                          b'"pending":null,"request":null}'),
}


@WAYS
@pytest.mark.parametrize("body", list(MISFITS.values()), ids=list(MISFITS))
def test_f2_a_json_object_that_does_not_fit_the_ops_shape_is_not_clankie(
        peer: Any, way: Any, body: bytes):
    p = peer(HangUpAfter(reply(body)))
    with pytest.raises(NotClankie) as err:
        way(p.url, "input_get")
    assert err.value.code == "not_clankie" and "did not answer like clankie" in str(err.value)
    assert "input_get" in err.value.detail


@pytest.mark.parametrize("way", [fitted_sync, fitted_async])
def test_f2_a_result_that_fits_comes_as_it_came(peer: Any, way: Any):
    body = (b'{"conversation_id":"c","incarnation":"i","revision":1,"pending":null,'
            b'"request":null}')
    p = peer(HangUpAfter(reply(body)))
    assert way(p.url, "input_get") == {"conversation_id": "c", "incarnation": "i",
                                       "revision": 1, "pending": None, "request": None}


def test_f2_without_fit_the_client_imports_no_dto_and_passes_any_object(peer: Any):
    """The CLI's light paths (completion, doctor) keep pydantic out; `fit` is opt-in."""
    p = peer(HangUpAfter(reply(b"{}")))
    with Client(p.url, "clk_x") as client:
        assert client.call("input_get", {}) == {}


STATUSES = {"a-string": b'"abc"', "null": b"null", "overflowing": b"1e999", "a-bool": b"true"}


@pytest.mark.parametrize("way", [fitted_sync, fitted_async])
@pytest.mark.parametrize("status", list(STATUSES.values()), ids=list(STATUSES))
def test_f3_a_problem_whose_status_is_no_number_is_not_clankie(
        peer: Any, way: Any, status: bytes):
    p = peer(HangUpAfter(reply(b'{"code":"forbidden","status":%s,"detail":"x"}' % status,
                               b"403 Forbidden")))
    with pytest.raises(NotClankie) as err:
        way(p.url, "input_get")
    assert err.value.status == 403


@pytest.mark.parametrize("status", ["abc", None, float("inf"), 1e999, True, 42, [1]])
def test_f3_api_error_takes_any_problem_and_defaults_a_status_that_is_none(status: Any):
    err = ApiError({"code": "forbidden", "status": status, "detail": "x"})
    assert (err.code, err.status) == ("forbidden", 500)


@pytest.mark.parametrize("way", [fitted_sync, fitted_async])
@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e999"])
def test_non_finite_json_constants_are_not_clankie(peer: Any, way: Any,
                                                   constant: bytes):
    """`--json` prints what came: a NaN would make it print invalid JSON."""
    p = peer(HangUpAfter(reply(b'{"conversation_id":"c","incarnation":"i","revision":%s,'
                               b'"pending":null,"request":null}' % constant)))
    with pytest.raises(NotClankie):
        way(p.url, "input_get")


BAD_HOSTS = ["http://" + "a" * 70 + ":80", "http://a..b:1", "http://.a:1"]


@pytest.mark.parametrize("url", BAD_HOSTS)
def test_f3_a_host_name_no_resolver_takes_is_a_bad_service_url_sync_and_async(url: str):
    with pytest.raises(BadServiceUrl):
        Client(url, "clk_x")

    async def run() -> None:
        async with AsyncClient(url, "clk_x"):
            pass
    with pytest.raises(BadServiceUrl):
        asyncio.run(run())


def test_f3_a_long_host_name_within_bounds_is_taken():
    Client("http://" + "a" * 63 + ".example:80", "clk_x").close()


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"1e999", b"-1e999"])
def test_non_finite_numbers_are_not_clankie_whatever_the_shape(peer: Any, constant: bytes):
    """Without `fit` too (a number the shapes leave open, as in `settings`)."""
    p = peer(HangUpAfter(reply(b'{"settings":{"x":%s}}' % constant)))
    with Client(p.url, "clk_x") as client, pytest.raises(NotClankie):
        client.call("service_info")
