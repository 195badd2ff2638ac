"""The read side: a window's counts in, an answer out, for the web views and the CLI alike.

Flask-free (``tests/test_architecture.py``): reading a window (:mod:`.window`), its
estimate for any metric kind through one estimator protocol (:mod:`.estimators`), the
poisoning alarms (:mod:`.alarms`) and the answers (:mod:`.answers`). Budget and privacy
accounting is :mod:`aggregator.stats.accounting`. See docs/architecture/layout.md.
"""
