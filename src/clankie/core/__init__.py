"""The pure core: the question lifecycle and the authority rules of SPEC.md.

No I/O, no clock, no randomness and no framework: time and new IDs come in as arguments,
and every decision is returned as a value (a `Change`) or raised as one `ClankieError`.
"""
