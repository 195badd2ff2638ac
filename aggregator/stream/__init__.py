"""The stream runtime: the exactly-once consumer of the report streams, and the counts it keeps.

Redis and numpy only: a worker process loads neither Flask nor matplotlib nor scipy
(``tests/test_architecture.py``).

* :mod:`~aggregator.stream.worker`: the consumer loop: discover streams, read, claim,
  commit, dead-letter, trim
* :mod:`~aggregator.stream.entries`: stream replies → payload batches (bulk JSON parsing)
* :mod:`~aggregator.stream.counts`: tidies a window's delta blobs after commits (reading a
  window is :mod:`aggregator.query.window`'s)

The keys, the Lua scripts and the counts schema they rely on are :mod:`ldp_store`'s.
"""
