"""SPEC section 10 "Finding what waits" on the phone page: an archived conversation is not
listed; a conversation whose question waits is listed first, marked."""

from __future__ import annotations

from tests.web.test_h4_http import page_client, paired
from tests.web.test_page_words import section
from tests.world import World


def test_finding_the_page_leaves_an_archived_conversation_out_and_marks_what_waits(
        world: World):
    archived, waiting, quiet = (world.conversation() for _ in range(3))
    world.ask(waiting)
    world.call("conversation_archive", {"conversation_id": archived})
    world.call("conversation_send", {"conversation_id": quiet, "text": "latest"})
    with page_client(world) as client:
        paired(world, client)
        nav = section(client.get("/view").text, '<nav aria-label="Conversations">', "</nav>")
    assert archived[:8] not in nav
    assert nav.index(waiting[:8]) < nav.index(quiet[:8])  # waiting first, though older
    assert nav.count("Question waiting") == 1
