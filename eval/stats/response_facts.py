"""What one record's response says about refining, worked out once per record.

The group, the step trend and the example slot a record feeds all need its refine spans, their
quality and its correctness; parsing the response once and handing the result to each keeps
the per-record cost to one :func:`~rewards.format.check_format` and one
:func:`~rewards.refine_quality.assess_refines`, and the definitions in their modules.
"""

from __future__ import annotations

from rewards.format import FormatResult, RefineSpan, check_format
from rewards.refine_quality import RefineQuality, assess_refines, is_correct

_REFINE_OPEN = "<refine>"


class ResponseFacts:
    """Format parse, refine spans, refine quality and correctness of one record dict.

    Responses that neither passed the format check (the record's ``format_ok``, what the reward
    saw) nor contain an opening refine tag are not parsed: they have no think block to measure
    and no span to find (plain rollouts, most broken formats), and most of a dump is such text.
    """

    __slots__ = ("fmt", "spans", "n_refine", "correct", "quality")

    def __init__(self, rec: dict, correct_at: float):
        text = rec["response"]
        fmt = check_format(text) if rec["format_ok"] or _REFINE_OPEN in text else None
        self.fmt: FormatResult | None = fmt
        self.spans: tuple[RefineSpan, ...] = fmt.refine_spans if fmt is not None else ()
        self.n_refine = len(self.spans)
        self.correct: bool | None = is_correct(rec["acc"], correct_at)
        self.quality: RefineQuality | None = (
            assess_refines(text, rec["gold"], self.correct, fmt=fmt) if self.spans else None
        )

    @property
    def n_empty(self) -> int:
        return self.quality.n_empty if self.quality is not None else 0

    @property
    def think(self) -> str | None:
        """The think block of a well-formed response, else None."""
        return self.fmt.think if self.fmt is not None and self.fmt.ok else None
