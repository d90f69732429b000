"""Self-Refine in `pasr eval` on a scripted backend: when the loop stops, its batching across
questions, the history in each prompt, token counts, and the records it leaves."""

from __future__ import annotations

from eval.backends import GenParams
from eval.run import run_eval
from eval.self_refine import NO_CHANGE, SelfRefinePrompts, run_self_refine
from tests.scripted_eval import Scripted, cfg_for, golds, records_of


def scripted_self_refine(no_change_at: dict[str, int | None]):
    """Answers are numbered per question; feedback says NO CHANGE NEEDED at the given round."""
    rounds: dict[str, int] = {}

    def respond(system, user):
        q = next(q for q in no_change_at if q in user)
        if system is not None:  # first answer (plain system prompt)
            return f"first answer to {q} is \\boxed{{1}}"
        if "Review the latest answer" in user:
            rounds[q] = rounds.get(q, 0) + 1
            if no_change_at[q] == rounds[q]:
                return f"All steps check out.\n{NO_CHANGE}"
            return f"step two of {q} is wrong; recompute"
        return f"improved answer {rounds[q]} to {q} is \\boxed{{{rounds[q] + 1}}}"

    return respond


def test_self_refine_stops_and_counts_tokens():
    prompts = SelfRefinePrompts.load()
    plan = {"QA": 1, "QB": None, "QC": 2}
    backend = Scripted(scripted_self_refine(plan))
    traces = run_self_refine(list(plan), lambda chats: backend.generate(chats, GenParams()), prompts)
    a, b, c = traces
    assert [p.name for p in a.passes] == ["answer", "feedback:1"] and a.stop == "no_change"
    assert a.final.name == "answer" and "\\boxed{1}" in a.final.text
    assert [p.name for p in c.passes] == ["answer", "feedback:1", "refine:1", "feedback:2"] and c.stop == "no_change"
    assert c.final.name == "refine:1"
    assert len(b.passes) == 1 + 2 * 4 and b.stop == "max_rounds" and b.rounds == 4
    assert b.final.name == "refine:4" and "\\boxed{5}" in b.final.text
    for t in traces:
        assert t.total_tokens == sum(len(p.text.split()) for p in t.passes)
    # batched across questions: one call per pass kind per round, active questions only
    assert [len(call) for call in backend.calls] == [3, 3, 2, 2, 1, 1, 1, 1, 1]
    # the history of earlier answers and feedback is in the prompt; template braces survive
    fb2 = next(ch[-1]["content"] for ch in backend.calls[3] if "QB" in ch[-1]["content"])
    for part in ("Attempt 1:", "first answer to QB", "Feedback on attempt 1:", "Attempt 2:", "improved answer 1"):
        assert part in fb2
    refine_prompt = backend.calls[2][0][-1]["content"]
    assert "\\boxed{}" in refine_prompt and "Feedback on attempt 1:" in refine_prompt
    assert all(ch[0]["role"] == "user" for call in backend.calls[1:] for ch in call)


def test_self_refine_zero_rounds_is_the_plain_answer():
    backend = Scripted(scripted_self_refine({"QA": None}))
    (t,) = run_self_refine(["QA"], lambda chats: backend.generate(chats, GenParams()), SelfRefinePrompts.load(), 0)
    assert [p.name for p in t.passes] == ["answer"] and len(backend.calls) == 1


def test_self_refine_method_records(data_env, tmp_path):
    gold = golds(data_env, "gsm8k", 2)
    q1, q2 = list(gold)

    def respond(system, user):
        q = q1 if q1 in user else q2
        if system is not None:
            return "I think it is \\boxed{0}"
        if "Review the latest answer" in user:
            return f"Fine.\n{NO_CHANGE}" if ("Attempt 2:" in user or q == q1) else "Wrong total."
        return f"Corrected: \\boxed{{{gold[q]}}}"

    summary = run_eval(cfg_for(tmp_path, method="self-refine", limit=2), backend=Scripted(respond))
    recs = {r.prompt: r for r in records_of(tmp_path / "run")}
    r1, r2 = recs[q1], recs[q2]
    assert r1.variant == "self_refine:answer" and r1.acc == 0.0 and r1.extra["stop"] == "no_change"
    assert r2.variant == "self_refine:refine:1" and r2.acc == 1.0 and r2.extra["rounds"] == 2
    assert [p["variant"] for p in r2.extra["passes"]] == [
        "self_refine:answer",
        "self_refine:feedback:1",
        "self_refine:refine:1",
        "self_refine:feedback:2",
    ]
    assert r2.response_tokens == sum(p["tokens"] for p in r2.extra["passes"]) > r2.extra["final_tokens"]
    assert summary["datasets"]["gsm8k"]["accuracy"] == 0.5
