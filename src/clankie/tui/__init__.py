"""The operator TUI, `clankie chat`: a Textual app over the client; it decides nothing."""
