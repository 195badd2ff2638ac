"""What every public edge shares: the collector's and the relay's defences.

Per-source admission limits under a rotating keyed hash (:mod:`ldp_edge.admission`),
a per-source connection cap (:mod:`ldp_edge.connections`), deadlines for slow bodies
(:mod:`ldp_edge.slow_bodies`), CORS for web pages (:mod:`ldp_edge.cors`), plain WSGI
answers (:mod:`ldp_edge.answers`) and gunicorn's logs without addresses
(:mod:`ldp_edge.gunicorn_logging`, :mod:`ldp_edge.gunicorn_worker`). No Flask app, no
Redis: the relay, run by another party, imports this and the SDK only. In full:
``docs/security/limits.md``.
"""
