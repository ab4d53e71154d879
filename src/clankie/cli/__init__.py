"""The `clankie` command line: people's surface for setting up, serving and answering."""
