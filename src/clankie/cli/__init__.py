"""The `clankie` command line: people's surface for setting up, serving and answering.

Owns the one name both its entry point (`entry`) and the command line itself (`main`) read,
so that their imports run one way, `entry` to `main` (issue 32): the variable through which
a shell asks for completions.
"""

COMPLETE_VAR = "_CLANKIE_COMPLETE"
