"""The composition root: the one place that wires the collector, the read side and the
workers into ``ldp serve`` and the ``ldp`` command line (docs/architecture/layout.md).

* :mod:`~ldp_server.app`: the composed WSGI app: collector + read APIs + dashboard
* :mod:`~ldp_server.serve`: the supervisor: embedded Redis, gunicorn, aggregator
  workers, stopped in order
* :mod:`~ldp_server.supervise`: restarting a crashed child with backoff, giving up on
  one that keeps crashing, counting restarts for ``/metrics``
* :mod:`~ldp_server.forward`: the read routes forwarded from the ingest to the read service
* :mod:`~ldp_server.demo`: a simulated population through real HTTP, estimates against
  the truth
* :mod:`~ldp_server.cli`: the ``ldp`` group (:mod:`aggregator.cli`'s commands, ``serve``
  from :mod:`~ldp_server.commands`, ``demo`` from :mod:`~ldp_server.demo_command`, ``wait``
  from :mod:`~ldp_server.wait`), each imported when invoked; ``python -m ldp_server``

It is the only package that imports both :mod:`collector` and :mod:`aggregator`, and no
package imports it (``tests/test_architecture.py``).
"""
