"""The offline study tools: simulation, ε audits, poisoning, the tradeoff sweep, plots.

Run from the ``ldp`` command line (``simulate``, ``audit``, ``tradeoff``, ``attack``),
the load tests and the benchmarks; never by the live service (what it serves, planning
and accounting included, is in :mod:`aggregator.stats`). numpy and scipy; matplotlib is
imported only by :mod:`~aggregator.analysis.plots`, when a sweep draws.

* :mod:`~aggregator.analysis.simulation`: seeded whole-population runs: MSE against the
  exact variance, interval coverage
* :mod:`~aggregator.analysis.audit`: an empirical lower bound on the realised ε
  (Clopper–Pearson)
* :mod:`~aggregator.analysis.crafting`: fake clients' crafted reports (maximal gain
  attack, input-manipulation baseline)
* :mod:`~aggregator.analysis.poisoning`: what they do to the estimates: theory and
  simulation against the real decoders (``ldp attack poison``)
* :mod:`~aggregator.analysis.tradeoff`: the ε × N × mechanism sweep and its CSV
* :mod:`~aggregator.analysis.plots`: the sweep's figures (matplotlib)
"""
