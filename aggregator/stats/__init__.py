"""The statistics: pure functions over arrays, no I/O (numpy; no Redis, no Flask).

* :mod:`~aggregator.stats.codecs`: the codec protocol; vectorized, additive batch decoders
  of every mechanism's reports into support counts
* :mod:`~aggregator.stats.frequency`: unbiased frequency estimates, standard errors,
  intervals (:func:`estimate`, :func:`estimate_from_counts`)
* :mod:`~aggregator.stats.numeric`: numeric metrics: exact sums, means with intervals
  (:func:`estimate_mean`)
* :mod:`~aggregator.stats.postprocess`: Norm-Sub, the labelled post-processing onto the
  simplex
* :mod:`~aggregator.stats.anytime`: confidence sequences, valid however often one looks
  (:func:`frequency_cs`, :func:`mean_cs`), from the same additive sums
* :mod:`~aggregator.stats.planning`, :mod:`~aggregator.stats.string_planning`: the users
  an interval half-width or a string's discovery needs (``ldp plan``, the explorer)
* :mod:`~aggregator.stats.shuffling`: the central ε of shuffled reports
* :mod:`~aggregator.stats.robustness`: how far fake clients can move an estimate, in theory
"""
