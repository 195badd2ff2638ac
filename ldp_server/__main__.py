"""``python -m ldp_server``: the ``ldp`` command line."""

from ldp_server.cli import main

main()
