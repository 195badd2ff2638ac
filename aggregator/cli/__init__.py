"""The aggregator's ``ldp`` commands: one module per command or group (as ``rq/cli/``).

* :mod:`~aggregator.cli.simulate`, :mod:`~aggregator.cli.plan`, :mod:`~aggregator.cli.audit`,
  :mod:`~aggregator.cli.tradeoff`: the offline studies, one module each (their stacks
  differ: scipy for the audit, matplotlib for the tradeoff's plots)
* :mod:`~aggregator.cli.poison`, :mod:`~aggregator.cli.reconstruct`: ``attack poison``,
  ``attack reconstruct``
* :mod:`~aggregator.cli.metrics`: ``metrics list|show|create|retire|unretire|delete``
* :mod:`~aggregator.cli.catalog`: ``lint``, ``generate``, ``dictionary`` (the metrics registry)
* :mod:`~aggregator.cli.export`: ``export``
* :mod:`~aggregator.cli.estimates`: ``estimates``
* :mod:`~aggregator.cli.aggregate`: ``aggregate``
* :mod:`~aggregator.cli.alerts`: ``alerts list|create|ack|resolve|silence|delete``
* :mod:`~aggregator.cli.keys`: ``keys list|rotate`` (the Oblivious HTTP gateway's keys)
* :mod:`~aggregator.cli.options`: options the study commands share
* :mod:`~aggregator.cli.console`: rich output, JSON, progress bars

The ``ldp`` group itself (and ``ldp attack``), with ``serve`` and ``demo``, is assembled
by the composition root (:mod:`ldp_server.cli`), which names each command's module and
imports only the invoked command's: a command module imports what its job needs at its
top.
"""
