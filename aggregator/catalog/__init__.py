"""Metrics as code: the app's metrics registry file, linted, accounted and turned into
typed APIs and a privacy dictionary.

* :mod:`~aggregator.catalog.registry_file`: the file read with each field's line
* :mod:`~aggregator.catalog.composition`: a device's worst-case ε per day, period, year
  and lifetime across every metric (sequential composition; advanced composition offered)
* :mod:`~aggregator.catalog.lint`: the rules ``ldp lint`` checks
* :mod:`~aggregator.catalog.generate`: ``ldp generate python|ts|java``
* :mod:`~aggregator.catalog.dictionary`: the privacy dictionary page

The guide, with the arithmetic: ``docs/guides/metrics-as-code.md``.
"""
