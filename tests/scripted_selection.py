"""A scripted backend for the tests of `pasr eval` choosing among candidates (Self-Refine
``--select best``, best-of-n ``--select majority|score``), no model.

It answers by prompt kind: a chat with a system prompt is an answer (the plain prompt:
Self-Refine's first answer, each best-of-n candidate), a user message with the scoring
template's "Proposed answer:" is a scoring pass, the rest are Self-Refine's feedback and refine
passes. Tokens are words, so every count can be checked by hand.
"""

from __future__ import annotations

from eval.backends import Completion, GenParams

SCORE_MARK = "Proposed answer:"  # in prompts/templates/self_score.txt


class Scripted:
    """``respond(kind, question, chat)`` per chat, kind = answer | score | feedback | refine;
    records every call's chats and max_new_tokens."""

    name = "scripted"

    def __init__(self, respond):
        self.respond = respond
        self.calls: list[tuple[list, int]] = []

    def load(self) -> None:
        pass

    def generate(self, chats, params: GenParams, on_finished=None):
        self.calls.append(([list(c) for c in chats], params.max_new_tokens))
        out = []
        for chat in chats:
            text = self.respond(kind_of(chat), chat[-1]["content"], chat)
            out.append(Completion(text, len(text.split()), "stop"))
        return out

    def kinds(self) -> list[str]:
        """The kind of each call (all chats of a call are of one kind)."""
        return [kind_of(chats[0]) for chats, _ in self.calls]


def kind_of(chat) -> str:
    user = chat[-1]["content"]
    if chat[0]["role"] == "system":
        return "answer"
    if SCORE_MARK in user:
        return "score"
    return "feedback" if "Review the latest answer" in user else "refine"


def generator(backend: Scripted, default_limit: int = 1500):
    """What eval.run hands a method: chats in, completions out, a pass's own limit honoured."""

    def generate(chats, max_new_tokens: int | None = None):
        return backend.generate(chats, GenParams(max_new_tokens=max_new_tokens or default_limit))

    return generate


def candidate_of(user: str) -> str:
    """The candidate text a scoring prompt carries."""
    return user.split(SCORE_MARK, 1)[1].split("Check the proposed answer", 1)[0].strip()


def score_reply(score) -> str:
    return "I checked each step. No score today." if score is None else f"The steps hold.\nScore: {score}"


def golds(n: int) -> dict[str, str]:
    from data.loaders import load_examples

    return {ex.question: ex.answer for ex in load_examples("gsm8k", limit=n)}


def scripted_samples(samples: dict[str, list[str]], scores: dict[str, list] | None = None):
    """Question q's k-th candidate is samples[q][k] (tagged "#k" so scoring can tell them
    apart); its score, scores[q][k]."""
    seen: dict[str, int] = {}

    def respond(kind, user, chat):
        q = next(q for q in samples if q in user)
        if kind == "answer":
            k = seen.get(q, 0)
            seen[q] = k + 1
            return f"candidate #{k} says {samples[q][k]}"
        assert kind == "score", kind
        k = int(candidate_of(user).split("#", 1)[1].split()[0])
        return score_reply(scores[q][k])

    return respond
