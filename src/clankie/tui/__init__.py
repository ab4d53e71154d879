"""The operator TUI, `clankie chat`: a Textual app over the client (`app`); its own
decisions, pure, in `decide`; its words in `render`. It decides nothing the service decides."""
