"""Alerts on the estimates: rules an operator defines, tested with a false-alarm guarantee.

* :mod:`~aggregator.alerts.rules`: a rule (the API's body) and its checks
* :mod:`~aggregator.alerts.evaluate`: arm, evaluate (the workers, as reports arrive),
  fire, acknowledge, resolve, silence
* :mod:`~aggregator.alerts.notify`: webhooks and email, at least once

The tests themselves are pure math in :mod:`aggregator.stats.alerting`; the Redis contract
is :mod:`ldp_store.alerts`. Guide: ``docs/guides/alerts.md``.
"""
