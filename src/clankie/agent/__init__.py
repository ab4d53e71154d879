"""Clankie itself: the context it is given, its turn loop, its one tool, its model providers.

It imports only `clankie.core` and `clankie.dto`: the service hands it a `TurnContext` and
a `ToolBox`, so the agent never touches the store or HTTP.
"""
