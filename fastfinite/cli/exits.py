"""The exit codes of the ``fastfinite`` command (its ``--help`` lists them)."""

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
