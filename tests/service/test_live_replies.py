"""`LiveReplies` alone (SPEC D4, D5, D7): what a reader sees of a reply being written is what
a stop keeps of it, even when the run process publishes more while the stop commits."""

from __future__ import annotations

from clankie import dto
from clankie.service.live import LiveReplies, Publish


def publish(live: LiveReplies, appended: str, reply_id: str = "rp1") -> None:
    live.publish(Publish("c1", "r1", reply_id, 1, "writing", appended, (), 1.0, 2.0))


def shown(live: LiveReplies) -> str:
    got = live.read("c1", dto.LiveAt(reply_id=None, offset=0))
    assert got is not None
    return got.text


def test_d7_a_publish_after_the_text_to_keep_was_read_never_reaches_a_reader():
    """The CLI's red team once saw "w31" live while the stopped reply was kept ending at
    "w30": the run process published between the stop's read and its commit."""
    woken: list[str] = []
    live = LiveReplies(woken.append)
    publish(live, "w30")
    assert live.keep("c1", "r1") == ("rp1", "w30")
    publish(live, " w31")  # on its way while the stop commits
    assert shown(live) == "w30"
    assert woken == ["c1"]  # no reader was woken for a change it may not see
    live.settled("c1", "r1")
    assert live.read("c1", dto.LiveAt(reply_id=None, offset=0)) is None
    publish(live, " w32")
    assert live.read("c1", dto.LiveAt(reply_id=None, offset=0)) is None


def test_d4_keeping_another_runs_reply_or_none_changes_nothing():
    live = LiveReplies(lambda _: None)
    assert live.keep("c1", "r1") is None
    publish(live, "hello")
    assert live.keep("c1", "r2") is None
    publish(live, " there")
    assert shown(live) == "hello there"
