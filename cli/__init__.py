"""The command line: `attention-explorer <subcommand>` (cli/main.py)."""
