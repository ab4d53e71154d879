"""Facts about local directories, read-only: canonical identity now, Git membership later."""
