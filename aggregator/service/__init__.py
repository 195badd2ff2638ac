"""Running the whole system: ``ldp serve`` and ``ldp demo``.

* :mod:`~aggregator.service.app`: the composed WSGI app: collector + read APIs + dashboard
  (the only module here that imports :mod:`collector`)
* :mod:`~aggregator.service.serve`: the supervisor: embedded Redis, gunicorn, aggregator
  workers, stopped in order
* :mod:`~aggregator.service.supervise`: restarting a crashed child with backoff, giving
  up on one that keeps crashing, counting restarts for ``/metrics``
* :mod:`~aggregator.service.demo`: a simulated population through real HTTP, estimates
  against the truth
"""
