"""`pasr stats`: refine-tag usage statistics, report and plots from rollout dumps.

One pass over the dumps, in bounded memory, then pure rendering of the numbers:

* ``discovery``: which files under the given paths are record dumps, metrics logs, eval
  summaries, and which run directory each belongs to;
* ``runs``: what a run directory says: its label (the directory, not a run id), a ``pasr eval``
  run's checkpoint step (``summary.json``), a training run's refine reward (``config.yaml``);
* ``metrics_log``: numeric series from a run's ``metrics.jsonl``;
* ``accumulate``: the :class:`~eval.stats.accumulate.Collector` every record goes through once
  (records are read and validated by :mod:`data.records`);
* ``groups``: per-group counters (a training run's variant, an in-training evaluation, an
  eval run's dataset and method);
* ``counting``: the bounded-memory counting pieces the groups are built from;
* ``trends``: per-step series of training runs and in-training evaluations;
* ``pairing``: per-question outcomes of eval runs and in-training evaluations, which two to
  compare and in which order (never the order of the arguments), and their transition matrix;
* ``rrr``: Reflect, Retry, Reward records (attempts, reflections, retries, ``pasr eval --method
  reflect-retry``): per-step and per-evaluation numbers and example exchanges; their groups show
  the PASR format and refine columns as not applicable;
* ``report``: ``report.md`` from the ``stats.json`` dict, one module per section
  (``report_groups``, ``report_rrr``, ``report_training``, ``report_pairs``; their Markdown
  pieces: ``report_markdown``);
* ``plots``: PNG plots from the same dict (and ``--montage``), one module per figure family
  (``plots_overview``, ``plots_training``, ``plots_rrr``, ``plots_transitions``; the pieces they
  share: ``plot_parts``; their file names, which the report links: ``plot_names``);
  ``plot_style``: their readable axes ("no data" frames, 0-100 % rate axes, axes of a minimum span
  with the values printed, wrapped titles), shared with ``pasr eval compare``'s plot;
* ``refine_term``: the refine term's reach per run (a terminal line, a report section, a plot);
* ``cli``: the ``pasr stats`` subcommand.

Format parsing is :func:`rewards.format.check_format`; the definitions of empty refines, refine
fixes and correctness live in :mod:`rewards.refine_quality`, shared with the training engines'
per-step metrics.
"""


class StatsInputError(Exception):
    """A problem with the inputs that stops the run (missing path, unknown ``--pair`` run)."""
