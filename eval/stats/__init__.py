"""`pasr stats`: refine-tag usage statistics, report and plots from rollout dumps.

* ``collect``: finds record and ``metrics.jsonl`` files, streams them (bounded memory) into
  per-group counters, per-step trends and eval outcome tables for paired comparisons;
* ``report``: ``report.md`` from the ``stats.json`` dict;
* ``plots``: PNG plots (matplotlib, Agg) from the same dict;
* ``cli``: the ``pasr stats`` subcommand.

The definitions of empty refines and refine fixes live in :mod:`rewards.refine_quality`,
shared with the training engines' per-step metrics.
"""
