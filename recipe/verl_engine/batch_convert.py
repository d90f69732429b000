"""Between verl's ``DataProto`` rows and the step core (:mod:`recipe.scoring`), both ways.

* :func:`rollouts_from_rows` reads a slice of the rollout manager's output as engine-neutral
  :class:`recipe.scoring.Rollout` objects (metadata from the input rows, text decoded from the
  generated token ids with :func:`recipe.scoring.decode_response`, the step core's one decoder);
* :func:`apply_train_scores` writes the step core's scores into the refine rows the way verl
  reads them: each row's score in ``rm_scores`` at its last valid response token (where verl's
  own reward loop puts a sequence score, ``AgentLoopWorker._postprocess``), the mask as a zeroed
  ``response_mask`` and the ``pasr_trained`` column (:mod:`recipe.advantages`: a masked row is
  outside its group's GRPO statistics and gets advantage 0), the reward parts as
  ``reward_extra_info``;
* :func:`apply_validation_scores` does the same for validation, with the accuracy as the score.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from data.records import RolloutRecord
from recipe.advantages import TRAINED
from recipe.scoring import Rollout, decode_response


def _question(extra_info: dict, messages) -> str:
    if extra_info.get("question"):
        return str(extra_info["question"])
    users = [m.get("content") for m in list(messages or []) if m.get("role") == "user"]
    return str(users[-1]) if users else ""


def _gold(reward_model) -> str:
    if isinstance(reward_model, dict):
        gt = reward_model.get("ground_truth")
        return "" if gt is None else str(gt)
    return ""


def response_lengths(rows) -> torch.Tensor:
    """Valid response tokens per row (the agent loop right-pads responses)."""
    batch = rows.batch
    prompt_len = batch["prompts"].shape[1]
    return batch["attention_mask"][:, prompt_len:].sum(dim=1).long()


def query_ids(inputs) -> list[str]:
    """A query id per row: the dataset id (``extra_info.id``, else ``extra_info.index``), made
    unique per ``uid`` so two copies of one question in a batch stay separate groups."""
    uids = inputs.non_tensor_batch["uid"]
    extras = inputs.non_tensor_batch.get("extra_info", [None] * len(uids))
    by_uid: dict[str, str] = {}
    taken: set[str] = set()
    out = []
    for uid, extra in zip(uids, extras):
        uid = str(uid)
        if uid not in by_uid:
            extra = extra if isinstance(extra, dict) else {}
            base = extra.get("id", extra.get("index"))
            qid = str(base) if base is not None else uid
            if qid in taken:
                qid = f"{qid}@{uid[:8]}"
            taken.add(qid)
            by_uid[uid] = qid
        out.append(by_uid[uid])
    return out


def rollouts_from_rows(inputs, outputs, tokenizer, variant: str) -> list[Rollout]:
    """One :class:`Rollout` per row. ``inputs``: the rows as sent to the rollout manager (for
    uid, question, gold, data source); ``outputs``: the same rows as generated."""
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} input rows but {len(outputs)} output rows")
    nt = inputs.non_tensor_batch
    n = len(inputs)
    lengths = response_lengths(outputs).tolist()
    max_len = outputs.batch["responses"].shape[1]
    responses = outputs.batch["responses"]
    qids = query_ids(inputs)
    extras = nt.get("extra_info", [None] * n)
    messages = nt.get("raw_prompt", [None] * n)
    sources = nt.get("data_source", ["unknown"] * n)
    golds = nt.get("reward_model", [None] * n)
    seen: dict[str, int] = defaultdict(int)
    out = []
    for i in range(n):
        uid = str(nt["uid"][i])
        extra = extras[i] if isinstance(extras[i], dict) else {}
        length = int(lengths[i])
        out.append(
            Rollout(
                query_id=qids[i],
                data_source=str(sources[i]),
                question=_question(extra, messages[i]),
                gold=_gold(golds[i]),
                variant=variant,
                text=decode_response(tokenizer, responses[i, :length].tolist()),
                n_tokens=length,
                finish_reason="length" if length >= max_len else "stop",
                sample_index=seen[uid],
            )
        )
        seen[uid] += 1
    return out


def _last_token_scores(rows, scores: Sequence[float]) -> torch.Tensor:
    responses = rows.batch["responses"]
    rm = torch.zeros(responses.shape, dtype=torch.float32)
    last = (response_lengths(rows) - 1).clamp(min=0)
    rm[torch.arange(len(scores)), last] = torch.tensor(list(scores), dtype=torch.float32)
    return rm


def _response_mask(rows) -> torch.Tensor:
    if "response_mask" in rows.batch.keys():
        return rows.batch["response_mask"].clone()
    lengths = response_lengths(rows)
    width = rows.batch["responses"].shape[1]
    return (torch.arange(width)[None, :] < lengths[:, None]).to(torch.int64)


def _extra_info(records: Sequence[RolloutRecord]) -> dict[str, np.ndarray]:
    """The reward parts as verl's reward_extra_info (all numeric: verl averages them per data
    source in validation)."""
    return {
        "acc": np.array([r.acc if r.acc is not None else 0.0 for r in records], dtype=np.float64),
        "format_reward": np.array([float(r.extra.get("format_reward", 0.0)) for r in records], dtype=np.float64),
        "refine_reward": np.array([r.refine_reward or 0.0 for r in records], dtype=np.float64),
        "has_refine": np.array([float(r.n_refine > 0) for r in records], dtype=np.float64),
        "judge_error": np.array([float(r.acc is None) for r in records], dtype=np.float64),
    }


def apply_train_scores(rows, records: Sequence[RolloutRecord], scores: Sequence[float], mask: Sequence[bool]):
    """Write the step core's ``scores`` and ``mask`` (:func:`recipe.scoring.group_scores`) into
    the refine ``rows`` (in place) and return them. ``records``: the rows' records, same order."""
    if not len(rows) == len(records) == len(scores) == len(mask):
        raise ValueError(f"{len(rows)} rows but {len(records)} records, {len(scores)} scores, {len(mask)} mask entries")
    trained = np.asarray(mask, dtype=bool)
    response_mask = _response_mask(rows)
    rows.batch["rm_scores"] = _last_token_scores(rows, scores)
    rows.batch["response_mask"] = response_mask * torch.from_numpy(trained).to(response_mask.dtype)[:, None]
    extra = _extra_info(records)
    rows.non_tensor_batch = {**rows.non_tensor_batch, **extra, TRAINED: trained}
    rows.meta_info = {**rows.meta_info, "reward_extra_keys": list(extra)}
    return rows


def apply_validation_scores(rows, records: Sequence[RolloutRecord]):
    """Validation: the score of a row is its judge accuracy (0 on a judge error, counted in the
    ``judge_error`` extra key), so ``val-core/<data_source>/reward`` reads as accuracy."""
    if len(rows) != len(records):
        raise ValueError(f"{len(rows)} rows but {len(records)} records")
    scores = [r.acc if r.acc is not None else 0.0 for r in records]
    rows.batch["rm_scores"] = _last_token_scores(rows, scores)
    extra = _extra_info(records)
    rows.non_tensor_batch = {**rows.non_tensor_batch, **extra}
    rows.meta_info = {**rows.meta_info, "reward_extra_keys": list(extra)}
    return rows
