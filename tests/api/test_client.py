"""`clankie.client`: results, problems, and the difference between unreachable and uncertain."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clankie.client import ApiError, AsyncClient, Client, ServiceUnreachable, Uncertain
from tests.e2e.served import Served
from tests.peers import DroppingPeer


def test_no_reply_after_sending_is_uncertain_and_is_sent_once(tmp_path: Path):
    peer = DroppingPeer(tmp_path / "drop.sock")
    try:
        with Client(f"unix://{tmp_path / 'drop.sock'}", "clk_x") as client, \
                pytest.raises(Uncertain):
            client.call("input_answer", {"conversation_id": "x"})
        assert len(peer.requests) == 1 and b"POST /v1/ops/input_answer" in peer.requests[0]
    finally:
        peer.close()


def test_nothing_listening_is_unreachable(tmp_path: Path):
    with Client(f"unix://{tmp_path / 'none.sock'}", "clk_x") as client, \
            pytest.raises(ServiceUnreachable):
        client.call("conversation_list")
    with Client("http://127.0.0.1:9", "clk_x") as client, pytest.raises(ServiceUnreachable):
        client.call("conversation_list")


def test_bad_url_is_refused_early():
    with pytest.raises(ValueError, match="CLANKIE_URL"):
        Client("ftp://somewhere", "clk_x")


def test_problems_become_api_errors_and_results_become_shapes(tmp_path: Path):
    served = Served.start(tmp_path / "home")
    try:
        with served.client() as client:
            assert client.op("conversation_list").conversations == []
            with pytest.raises(ApiError) as err:
                client.op("conversation_get",
                          conversation_id="0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b")
            assert (err.value.code, err.value.status) == ("not_found", 404)

        async def use_async() -> list:
            async with AsyncClient(f"unix://{served.home.socket}",
                                   served.home.token_file.read_text().strip()) as client:
                return (await client.op("conversation_list")).conversations

        assert asyncio.run(use_async()) == []
    finally:
        assert served.stop() == 0
