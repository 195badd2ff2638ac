"""``python -m aggregator.cli``: the ``ldp`` command line."""

from aggregator.cli import main

main()
