"""Issue 42, "a service that runs itself": the pure decisions of `clankie service`
(`clankie.autostart.decide`; docs/decisions.md, "Issue 42: `clankie service ...`", cited by
heading as "decision ...").

The systemd unit is checked by a real `systemd-analyze --user verify` (clean: exit 0 and not
a word said), for plain paths and for paths with every character systemd treats specially;
the launchd plist, which no macOS here can load, is parsed back with plistlib. A machine
without systemd-analyze fails these tests (never skips them): `.ci/run` installs it.
"""

from __future__ import annotations

import hashlib
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clankie.autostart import decide
from clankie.autostart.decide import Launch, Origin, Platform, Refused, Who, Write

LINUX, MACOS = Platform.LINUX, Platform.MACOS


def verify(unit_text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze --user verify` of `unit_text`, put where a user manager reads units
    ($XDG_CONFIG_HOME/systemd/user), in a user environment of the test's own."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is not installed: apt-get install systemd (issue 42)"
    config, runtime = tmp_path / "config", tmp_path / "runtime"
    folder = config / "systemd" / "user"
    folder.mkdir(parents=True)
    runtime.mkdir(mode=0o700)
    path = folder / decide.UNIT
    path.write_text(unit_text)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(config), "XDG_RUNTIME_DIR": str(runtime)}
    return subprocess.run([analyze, "--user", "verify", str(path)], capture_output=True,
                          text=True, timeout=60, env=env, cwd=tmp_path)


def launched(home: Path, *serve: str, pythonpath: str | None = None,
             executable: str = sys.executable) -> Launch:
    return decide.launch(argv0="/x/site-packages/clankie/__main__.py", argv0_runs=True,
                         executable=executable, cwd="/", package_root="/src",
                         pythonpath=pythonpath, home=home, serve=serve)


def test_issue42_the_unit_is_clean_for_systemd_analyze_verify(tmp_path: Path):
    """Decision "The unit": Restart=on-failure, the journal, verified clean."""
    text = decide.systemd_unit(launched(tmp_path / "home", "--web", "127.0.0.1:8766"), "0.1.0")
    done = verify(text, tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), done
    lines = text.splitlines()
    for wanted in ("Restart=on-failure", "StandardOutput=journal", "StandardError=journal",
                   "WantedBy=default.target", "RestartPreventExitStatus=2", "KillMode=mixed",
                   f'Environment="CLANKIE_HOME={tmp_path / "home"}"',
                   f'ExecStart="{sys.executable}" "-m" "clankie" "serve" "--web" '
                   '"127.0.0.1:8766"'):
        assert wanted in lines, (wanted, text)
    assert not any(line.startswith(("User=", "Group=")) for line in lines)  # its user's own
    assert "clankie service uninstall" in text  # it says how to undo it


def test_issue42_paths_with_what_systemd_reads_specially_stay_themselves(tmp_path: Path):
    """Decision "The unit": `%` (a specifier), `$` (a variable) and spaces in the program's
    path, and quotes and a backslash in the home too, reach systemd as they are: verify
    finds the program at exactly that path (a mangled one would be "not executable")."""
    odd = tmp_path / "a b%h$HOME"
    odd.mkdir()
    program = odd / "python"
    program.symlink_to(sys.executable)
    home = tmp_path / "home %n $X \"q' \\z"
    text = decide.systemd_unit(launched(home, executable=str(program)), "0.1.0")
    done = verify(text, tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), (done, text)
    again = tmp_path / "again"
    again.mkdir()
    assert verify(text.replace("%%", "%"), again).returncode != 0  # as if left unescaped


@pytest.mark.parametrize("folder", ["q'x", 'q"x', "b\\z"])
def test_issue42_a_program_path_systemd_cannot_start_is_refused_as_input(folder: str):
    """systemd starts no program whose path holds a quote or a backslash: said before
    anything is written (exit 2), not found out at the next login."""
    with pytest.raises(Refused) as refused:
        decide.systemd_unit(launched(Path("/h"), executable=f"/opt/{folder}/python"), "0.1.0")
    assert (refused.value.code, refused.value.exit) == ("invalid_request", 2)


def test_issue42_a_unit_that_verify_refuses_is_told_apart(tmp_path: Path):
    """The check above is a real one: a unit naming no program fails it."""
    text = decide.systemd_unit(launched(tmp_path, executable="/nonexistent/python"), "0.1.0")
    assert verify(text, tmp_path).returncode != 0


def test_issue42_the_launchd_plist_parses_with_keepalive_and_the_same_words(tmp_path: Path):
    """Decision "macOS": no macOS here, so the plist is parsed back with plistlib: the
    label, the command line and the home as given, RunAtLoad, KeepAlive while it does not
    exit successfully, its log file."""
    home = tmp_path / "a <b> & \"c\" %d $e"
    made = launched(home, "--web", "127.0.0.1:8766", pythonpath="/src")
    text = decide.launchd_plist(made, "0.1.0", decide.launchd_log(tmp_path))
    document = plistlib.loads(text.encode())
    assert document == {
        "Label": "clankie.serve",
        "ProgramArguments": [sys.executable, "-m", "clankie", "serve", "--web",
                             "127.0.0.1:8766"],
        "EnvironmentVariables": {"CLANKIE_HOME": str(home), "PYTHONPATH": "/src"},
        "RunAtLoad": True, "KeepAlive": {"SuccessfulExit": False},
        "StandardOutPath": str(tmp_path / "Library/Logs/clankie.log"),
        "StandardErrorPath": str(tmp_path / "Library/Logs/clankie.log")}
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist')
    assert decide.origin(text) is Origin.CLANKIE
    assert decide.described(text, MACOS)["runs"] == document["ProgramArguments"]


@pytest.mark.parametrize("platform", [LINUX, MACOS])
def test_issue42_status_reads_back_what_install_wrote_in_installs_types(
        platform: Platform, tmp_path: Path):
    """Issue 42, "read every `--json` as a program would": `status` gives `runs` as the argv
    list and `environment` as the object that `install --json` gives, parsed back from the
    unit (systemd's quoting, `%%` and `$$` undone) or the plist, for odd paths too."""
    home = tmp_path / "home %n $X \"q' \\z"
    made = launched(home, "--web", "127.0.0.1:8766", pythonpath="/src",
                    executable=str(tmp_path / "a b%h$HOME" / "python"))
    text = (decide.systemd_unit(made, "0.1.0") if platform is LINUX
            else decide.launchd_plist(made, "0.1.0", tmp_path / "log"))
    assert decide.described(text, platform) == {"runs": list(made.argv),
                                                "environment": dict(made.environment)}


def test_issue42_status_reads_a_units_own_quoting_or_says_it_cannot():
    """A unit not install's: systemd's words (unquoted, single-quoted, several assignments
    on one `Environment=` line) are read as systemd reads them; a line that is no systemd
    words gives null, never a string in place of the list."""
    text = ("[Service]\nExecStart=/usr/bin/clankie serve 'a b' \"c\\\"d\"\n"
            "Environment=A=1 'B=two words'\nEnvironment=\"C=3\"\n")
    assert decide.described(text, LINUX) == {
        "runs": ["/usr/bin/clankie", "serve", "a b", 'c"d'],
        "environment": {"A": "1", "B": "two words", "C": "3"}}
    broken = "[Service]\nExecStart=/usr/bin/clankie \"serve\nEnvironment=NOEQUALS\n"
    assert decide.described(broken, LINUX) == {"runs": None, "environment": None}
    assert decide.described("[Service]\n", LINUX) == {"runs": None, "environment": {}}


@pytest.mark.parametrize("platform", [LINUX, MACOS])
def test_issue42_the_seal_tells_clankies_own_file_an_edited_one_and_someone_elses(
        platform: Platform, tmp_path: Path):
    """Decision "What install does with a file that is there": only a file whose seal
    matches what follows it is clankie's as written."""
    made = launched(tmp_path)
    text = (decide.systemd_unit(made, "0.1.0") if platform is LINUX
            else decide.launchd_plist(made, "0.1.0", tmp_path / "log"))
    assert decide.origin(text) is Origin.CLANKIE
    edited = text.replace("clankie serve", "clankie  serve", 2).replace(
        "RunAtLoad", "RunAtLoadX").replace("RestartSec=2", "RestartSec=5")
    assert edited != text and decide.origin(edited) is Origin.EDITED
    body = text[text.index("\n", text.index(decide.SEAL)) + 1:]
    assert hashlib.sha256(body.encode()).hexdigest() in text
    assert decide.origin(body) is Origin.FOREIGN  # no seal: someone's own
    assert decide.origin("") is Origin.FOREIGN  # how a link is read
    header_changed = text.replace("Written by", "written by", 1)
    assert decide.origin(header_changed) is Origin.CLANKIE  # the comments are not the unit


def test_issue42_what_install_does_with_the_file_it_finds(tmp_path: Path):
    """Decision "What install does with a file that is there": nothing there, created; the
    same, unchanged; an earlier install's own, updated; edited or someone else's, refused
    `unit_differs` (exit 3, with the lines that would change) unless --replace."""
    path = tmp_path / "clankie.service"
    old = decide.systemd_unit(launched(tmp_path / "old"), "0.1.0")
    new = decide.systemd_unit(launched(tmp_path / "new"), "0.1.0")

    def write(found: str | None, replace: bool = False) -> Write:
        return decide.install_write(found, new, replace=replace, path=path, platform=LINUX)

    assert write(None) is Write.CREATED
    assert write(new) is Write.UNCHANGED
    assert write(old) is Write.UPDATED
    edited = old.replace("RestartSec=2", "RestartSec=9")
    for found in (edited, "[Service]\nExecStart=/bin/true\n", ""):
        with pytest.raises(Refused) as refused:
            write(found)
        assert (refused.value.code, refused.value.exit) == ("unit_differs", 3)
        assert "nothing was written" in refused.value.detail
        assert "--replace" in refused.value.fix and "systemctl --user edit" in refused.value.fix
        diff = refused.value.problem()["diff"]
        assert isinstance(diff, list) and any(line.startswith("+Environment=") for line in diff)
        assert write(found, replace=True) is Write.REPLACED
    with pytest.raises(Refused) as refused:
        write(edited)
    assert "was changed since" in refused.value.detail


def test_issue42_uninstall_removes_only_what_install_wrote(tmp_path: Path):
    """Decision "uninstall": only clankie's file as written; nothing there is no error."""
    path = tmp_path / "clankie.service"
    text = decide.systemd_unit(launched(tmp_path), "0.1.0")
    assert decide.may_remove(text, path, LINUX, 1000) is True
    assert decide.may_remove(None, path, LINUX, 1000) is False
    for found in (text.replace("RestartSec=2", "RestartSec=9"), "[Service]\n"):
        with pytest.raises(Refused) as refused:
            decide.may_remove(found, path, LINUX, 1000)
        assert (refused.value.code, refused.value.exit) == ("unit_differs", 3)
        assert "nothing was removed" in refused.value.detail
        assert "systemctl --user disable --now clankie.service" in refused.value.fix
        assert f"rm {path}" in refused.value.fix


def test_issue42_never_as_root_for_a_user():
    """Decision "Never as root for a user": sudo, doas, pkexec, a set-user-ID start, or a
    folder of another user's are refused (exit 5); root in its own folders is root's own
    service; a user is themself."""
    root_owned = {Path("/root"): 0, Path("/root/.config/systemd/user"): 0}

    def refusal(uid: int, euid: int, environ: dict[str, str],
                owners: dict[Path, int] | None = None) -> Refused | None:
        return decide.root_refusal(Who(uid, euid, environ, owners or root_owned), "install")

    assert refusal(1000, 1000, {}, {Path("/home/a"): 1000}) is None
    assert refusal(1000, 1000, {"SUDO_UID": "0"}, {Path("/home/a"): 1000}) is None
    assert refusal(0, 0, {}) is None  # root for root's own user manager
    assert refusal(0, 0, {"SUDO_UID": "0", "SUDO_USER": "root"}) is None
    for environ, named in (({"SUDO_UID": "1000", "SUDO_USER": "alice"}, "alice"),
                           ({"SUDO_UID": "1000"}, "user ID 1000"),
                           ({"DOAS_USER": "bob"}, "bob"), ({"PKEXEC_UID": "1001"}, "1001")):
        refused = refusal(0, 0, environ)
        assert refused is not None and (refused.code, refused.exit) == ("root_for_a_user", 5)
        assert named in refused.detail and "nothing was written" in refused.detail
        assert "without sudo" in refused.fix
    refused = refusal(0, 0, {}, {Path("/root"): 0, Path("/home/alice/.config"): 1000})
    assert refused is not None and refused.exit == 5 and "/home/alice/.config" in refused.detail
    refused = refusal(1000, 0, {})  # a set-user-ID start
    assert refused is not None and refused.exit == 5
    refused = decide.root_refusal(Who(0, 0, {"SUDO_UID": "7"}, root_owned), "uninstall")
    assert refused is not None and "nothing was removed" in refused.detail


def test_issue42_what_the_service_runs_is_this_install():
    """Decision "What the service runs": the `clankie` script this was started as, else this
    interpreter with `-m clankie`; absolute, links kept; the home always; PYTHONPATH only as
    the entry clankie came from."""
    home = Path("/h/home")
    script = decide.launch(argv0="bin/clankie", argv0_runs=True, executable="/v/bin/python",
                           cwd="/h/.local", package_root="/v/lib/site-packages",
                           pythonpath=None, home=home)
    assert script == Launch(("/h/.local/bin/clankie", "serve"), (("CLANKIE_HOME", "/h/home"),))
    module = decide.launch(argv0="/w/src/clankie/__main__.py", argv0_runs=False,
                           executable="/v/bin/python", cwd="/w", package_root="/w/src",
                           pythonpath="/other:src", home=home, serve=("--tcp", "[::1]:1"))
    assert module.argv == ("/v/bin/python", "-m", "clankie", "serve", "--tcp", "[::1]:1")
    assert module.environment == (("CLANKIE_HOME", "/h/home"), ("PYTHONPATH", "/w/src"))
    elsewhere = decide.launch(argv0="/w/src/clankie/__main__.py", argv0_runs=False,
                              executable="/v/bin/python", cwd="/w", package_root="/v/site",
                              pythonpath="/other", home=home)
    assert dict(elsewhere.environment) == {"CLANKIE_HOME": "/h/home"}


@pytest.mark.parametrize("home", ["/h/new\nline", "/h/tab\there", "/h/esc\x1b[2J",
                                  "/h/bytes\udcff"])
def test_issue42_what_a_service_file_cannot_carry_is_refused_as_input(home: str):
    with pytest.raises(Refused) as refused:
        decide.launch(argv0="/b/clankie", argv0_runs=True, executable="/p", cwd="/",
                      package_root="/s", pythonpath=None, home=Path(home))
    assert (refused.value.code, refused.value.exit) == ("invalid_request", 2)
    assert "nothing was written" in refused.value.detail


def test_issue42_where_the_file_goes():
    """Decision "Where the file goes"."""
    home = Path("/home/a")
    assert decide.unit_path(LINUX, {}, home) == Path(
        "/home/a/.config/systemd/user/clankie.service")
    assert decide.unit_path(LINUX, {"XDG_CONFIG_HOME": "/cfg"}, home) == Path(
        "/cfg/systemd/user/clankie.service")
    assert decide.unit_path(LINUX, {"XDG_CONFIG_HOME": "relative"}, home) == Path(
        "/home/a/.config/systemd/user/clankie.service")  # the XDG spec: ignored
    assert decide.unit_path(MACOS, {"XDG_CONFIG_HOME": "/cfg"}, home) == Path(
        "/home/a/Library/LaunchAgents/clankie.serve.plist")
    assert decide.platform_of("linux") is LINUX and decide.platform_of("darwin") is MACOS
    with pytest.raises(Refused) as refused:
        decide.platform_of("win32")
    assert refused.value.exit == 1 and "win32" in refused.value.detail


def test_issue42_the_commands_that_start_and_stop_it(tmp_path: Path):
    """Decision "Enable and start": `systemctl --user enable --now` after a daemon-reload;
    `disable --now` before the file goes; launchctl bootstrap and bootout in the gui domain."""
    path = tmp_path / "x"
    assert decide.start_commands(LINUX, 1000, path) == [
        ("systemctl", "--user", "daemon-reload"),
        ("systemctl", "--user", "enable", "--now", "clankie.service")]
    assert decide.start_commands(LINUX, 1000, path, start=False)[-1] == (
        "systemctl", "--user", "enable", "clankie.service")
    assert decide.stop_commands(LINUX, 1000) == [
        ("systemctl", "--user", "disable", "--now", "clankie.service")]
    assert decide.start_commands(MACOS, 501, path) == [
        ("launchctl", "bootstrap", "gui/501", str(path))]
    assert decide.stop_commands(MACOS, 501) == [("launchctl", "bootout", "gui/501/clankie.serve")]
