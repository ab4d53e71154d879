"""A full disk (SPEC storage_unavailable): a real `clankie serve` whose files cannot grow
(`RLIMIT_FSIZE` just above the store, `SIGXFSZ` ignored, so writes fail with EFBIG, the
WAL and `-shm` included). Writes fail `storage_unavailable` (503) with nothing
half-written (a write small enough to fit may still succeed), reads and snapshots keep
working, the service neither crashes nor spins,
and once space is back a restart finds every acknowledged answer with its run."""

from __future__ import annotations

import resource
import signal
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from clankie import dto
from clankie.client import ApiError, Client
from tests.e2e.served import Served, ask, settle

ROOM = 1024 * 1024  # bytes a file of the service may grow beyond the store's size


def no_growth_beyond(limit: int) -> Callable[[], None]:
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return limited


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks


def answer(client: Client, c: str) -> dict[str, Any]:
    snap = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
    assert snap.pending is not None
    return client.op(dto.INPUT_ANSWER,
                     dto.InputAnswer(conversation_id=c, request_id=snap.pending.request_id,
                                     incarnation=snap.incarnation, revision=snap.revision,
                                     option_id=snap.pending.options[0].option_id)).model_dump()


def test_a_full_disk_fails_writes_cleanly_keeps_reads_and_loses_nothing(tmp_path: Path,
                                                                         workspace: Path):
    home = tmp_path / "home"
    served = Served.start(home)  # unlimited: set up conversations with pending questions
    with served.client() as client:
        made = [str(client.op(dto.CONVERSATION_CREATE,
                              dto.ConversationCreate(workspace=str(workspace))).conversation_id)
                for _ in range(4)]
        for c in made:
            ask(client, c)
    assert served.stop() == 0
    limit = (home / "clankie.db").stat().st_size + ROOM  # the WAL may grow to this, no more

    served = Served.start(home, init=False, preexec=no_growth_beyond(limit))
    acknowledged: list[tuple[str, str, str]] = []
    refusals: list[tuple[int, str]] = []
    try:
        with served.client() as client:
            for turn in range(400):  # until the files cannot grow any more
                c = made[turn % len(made)]
                try:
                    # a write of another kind
                    if client.op(dto.INPUT_GET,
                                 dto.InputGet(conversation_id=c)).pending is None:
                        client.call("conversation_send", {"conversation_id": c, "text": "ask"})
                        settle(client, c)
                        continue
                    reply = answer(client, c)
                    acknowledged.append((c, reply["receipt"]["receipt_id"],
                                         reply["receipt"]["run_id"]))
                except ApiError as exc:
                    refusals.append((exc.status, exc.code))
                    break
            assert refusals == [(503, "storage_unavailable")], refusals
            for turn in range(30):  # full now: a write that does not fit is refused 503,
                c = made[turn % len(made)]  # one small enough may still fit
                for op, payload in (("conversation_send", {"conversation_id": c,
                                                           "text": "still there?"}),
                                    ("conversation_create", {"workspace": str(workspace)})):
                    try:
                        client.call(op, payload)
                    except ApiError as exc:
                        refusals.append((exc.status, exc.code))
            assert set(refusals) == {(503, "storage_unavailable")}
            assert len(refusals) > 10, refusals
            for c in made:  # reads and snapshots keep working
                snap = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
                assert snap.conversation_id == c
                assert client.call("events_tail", {"conversation_id": c})["events"]
            assert client.call("conversation_list", {})["conversations"]
        before = cpu_seconds(served.proc.pid)
        time.sleep(2)  # a measurement window, not a synchronisation: it must not spin
        assert cpu_seconds(served.proc.pid) - before < 1.0
        assert served.proc.poll() is None, "the service crashed"
    finally:
        served.stop(signal.SIGKILL)
    assert acknowledged, "nothing was accepted before the disk filled"
    logged = "".join(served.log)
    assert "storage failure" in logged and "Traceback" not in logged, logged[-2000:]

    served = Served.start(home, init=False)  # space is back
    try:
        with served.client() as client:
            for _, receipt_id, run_id in acknowledged:
                run = client.call("run_get", {"run_id": run_id})
                assert (run["receipt_id"], run["kind"]) == (receipt_id, "continuation")
                assert run["status"] in ("succeeded", "failed")
    finally:
        assert served.stop() == 0
    with closing(sqlite3.connect(home / "clankie.db")) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM questions q LEFT JOIN runs r ON "
                          "r.run_id = q.run_id WHERE q.status = 'answered' AND r.run_id IS NULL"
                          ).fetchone() == (0,)
