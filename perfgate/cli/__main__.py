"""``python -m perfgate.cli`` runs the CLI, as ``python -m perfgate`` does."""

from perfgate.cli import main

main()
