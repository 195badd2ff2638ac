"""The contract that the collector and the read side share: HTTP answers, request context.

``ldp serve`` runs the collector and the aggregator's read APIs in one app
(:mod:`ldp_server.app`), yet neither package imports the other. What both must
agree on lives here, as the Redis contract lives in :mod:`ldp_store`:

* :mod:`ldp_api.models`: the typed JSON both sides answer with: the error body
  ``{"error": str, "details": [str]}``, a mechanism's parameters, a device budget, the
  metric name of a URL;
* :mod:`ldp_api.openapi`: how a view documents itself (:func:`~ldp_api.openapi.documented`)
  and the OpenAPI 3.1 document built from what an app routes;
* :mod:`ldp_api.text_settings`: the settings read from the environment as text, the
  bearer tokens among them, and their checks (the app factory's and ``ldp serve``'s);
* :mod:`ldp_api.context`: what every request of one app shares (Redis, the metric
  registry, memory readings, the app's metrics), attached once, read through one typed
  accessor (:func:`~ldp_api.context.shared`).

It depends on the SDK's wire constants, the Redis contract (:mod:`ldp_store`), Flask,
prometheus-client and pydantic; on neither service.
"""
