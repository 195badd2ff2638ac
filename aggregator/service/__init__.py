"""Running the whole system: ``ldp serve`` and ``ldp demo``.

* :mod:`~aggregator.service.app`: the composed WSGI app: collector + read APIs + dashboard
  (the only module here that imports :mod:`collector`)
* :mod:`~aggregator.service.serve`: the supervisor: embedded Redis, gunicorn, aggregator
  workers, stopped in order
* :mod:`~aggregator.service.demo`: a simulated population through real HTTP, estimates
  against the truth
"""
