"""`clankie service`: `clankie serve` started by the owner's own service manager (issue 42).

A systemd user unit on Linux, a launchd agent on macOS, for the installed `clankie`.
`decide` says what is written, where, and whether what is found there is clankie's, with
no I/O (docs/decisions.md, "Issue 42: `clankie service ...`"); `host` reads and writes
the file and runs `systemctl --user` or `launchctl`. Neither imports the service, the store
or the client: installing a unit reaches no running service.
"""
