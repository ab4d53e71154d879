"""The workspace, read-only: its canonical identity, the project-membership fact, and the
workspace tools (confined opening, reading, listing and search, Git)."""
