"""`clankie mcp`: the bridge through which any MCP coding agent asks its owner (SPEC 13).

- `results`: what a tool returns, as pure functions of what the service said (P4).
- `start`: what is checked before the bridge serves (P2: the token, P3: the workspace).
- `server`: the MCP server on stdio, its five tools, each one or two dispatcher ops (P1).
- `hosts`: the lines that register the bridge in each host's user configuration (P2).

Only `server` imports the `mcp` SDK (the extra `clankie[mcp]`); nothing else of clankie
imports `server`, so no other command pays for it.
"""
