"""The storage contract shared by the collector and the aggregator: Redis, defined once.

Collector and aggregator are peers: both write and read Redis through this package and
neither imports the other. A key, a Lua script or a counts field is written here, in one
place.

* :mod:`~ldp_store.keys`: key builders with hash tags (one slot per metric version and
  shard)
* :mod:`~ldp_store.schema`: the counts hashes' fields (``n``, ``s:<i>``, ``s2:<i>``; ``c:<v>``
  before compact counts), what a batch adds to them (``Increments``), the packed support
  counts, and window names
* :mod:`~ldp_store.retention`: how long each window kind is kept, and when one expires
* :mod:`~ldp_store.scripts`: every Lua script (the collector's append, the worker's read,
  commit, dead-letter, window read and fold), each beside the typed function that builds
  its call: the only code that knows its KEYS/ARGV
* :mod:`~ldp_store.registry`: the metric registry: versioned definitions in Redis, cached
* :mod:`~ldp_store.connection`: the connection factory: one server or a Redis Cluster,
  retries, outage detection
* :mod:`~ldp_store.embedded`: a real ``redis-server`` started on a free port (``ldp serve``,
  tests)

Depends on :mod:`client_sdk` (metric definitions) and redis-py; nothing else here.
"""
