"""Between verl's ``DataProto`` rows and the step core (:mod:`recipe.scoring`), both ways.

* :func:`rollouts_from_rows` reads a slice of the rollout manager's output as engine-neutral
  :class:`recipe.scoring.Rollout` objects (metadata from the input rows, text decoded from the
  generated token ids with :func:`runtime.decoding.decode_response`, the step core's one decoder);
* :func:`apply_train_scores` writes the step core's scores into the refine rows the way verl
  reads them: each row's score in ``rm_scores`` at its last valid response token (where verl's
  own reward loop puts a sequence score, ``AgentLoopWorker._postprocess``), the mask as a zeroed
  ``response_mask`` and the ``pasr_trained`` column (:mod:`recipe.advantages`: a masked row is
  outside its group's GRPO statistics and gets advantage 0), the reward parts as
  ``reward_extra_info``;
* :func:`apply_validation_scores` does the same for validation, with the accuracy as the score;
* :func:`write_train_scores` / :func:`write_scores` are those two writers without PASR's reward
  parts, for any method's rows (RRR's reflection rows, :mod:`recipe.verl_engine.rrr_rollout`);
* :func:`prompt_token_ids`, :func:`response_token_ids` and :func:`truncate_responses` read and
  shorten generated rows in verl's layout (left-padded prompts, right-padded responses).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch

from data.records import RolloutRecord
from recipe.advantages import TRAINED
from recipe.scoring import Rollout
from runtime.decoding import decode_response


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


def prompt_token_ids(rows) -> list[list[int]]:
    """Each row's prompt tokens, left padding dropped."""
    prompts = rows.batch["prompts"]
    mask = rows.batch["attention_mask"][:, : prompts.shape[1]].bool()
    return [prompts[i][mask[i]].tolist() for i in range(len(rows))]


def response_token_ids(rows) -> list[list[int]]:
    """Each row's generated tokens (EOS included when it was generated), right padding dropped."""
    lengths = response_lengths(rows).tolist()
    responses = rows.batch["responses"]
    return [responses[i, : int(n)].tolist() for i, n in enumerate(lengths)]


def prompt_at_limit(rows) -> np.ndarray:
    """Rows whose prompt fills the whole prompt width (``rollout.prompt_length``): verl's agent
    loop left-truncates a longer prompt to that width (with a log warning only), so such a row
    may have lost the start of its chat."""
    width = rows.batch["prompts"].shape[1]
    return (rows.batch["attention_mask"][:, :width].sum(dim=1) >= width).numpy()


def truncate_responses(rows, max_tokens: int, pad_id: int):
    """A copy of ``rows`` with every response cut to its first ``max_tokens`` tokens (``rows``
    itself is not changed). The kept tokens are distributed exactly as a sample generated with
    ``max_tokens`` as its limit, which verl's agent loop cannot set per request: it is how RRR's
    ``rrr.max_reflection_tokens`` and ``rrr.max_retry_tokens`` apply. Cut tokens become padding in
    ``responses``, ``input_ids``, the masks and ``rollout_log_probs``; ``position_ids`` follow the
    new attention mask as verl computes them for text (multimodal 3-D position ids are left, their
    valid part does not change)."""
    from verl.utils.model import compute_position_id_with_mask

    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    out = rows.slice(0, None)
    if len(rows) == 0 or int(response_lengths(rows).max()) <= max_tokens:
        return out
    batch = rows.batch
    prompt_width = batch["prompts"].shape[1]
    width = batch["responses"].shape[1]
    keep = (torch.arange(width)[None, :] < max_tokens) & batch["attention_mask"][:, prompt_width:].bool()
    out.batch = batch.clone()
    new = out.batch
    new["responses"] = torch.where(keep, batch["responses"], torch.full_like(batch["responses"], pad_id))
    new["input_ids"] = torch.cat([batch["input_ids"][:, :prompt_width], new["responses"]], dim=1)
    new["attention_mask"] = torch.cat(
        [batch["attention_mask"][:, :prompt_width], keep.to(batch["attention_mask"].dtype)], dim=1
    )
    for key in ("response_mask", "rollout_log_probs"):
        if key in new.keys():
            new[key] = batch[key] * keep.to(batch[key].dtype)
    if batch["position_ids"].dim() == 2:
        new["position_ids"] = compute_position_id_with_mask(new["attention_mask"]).to(batch["position_ids"].dtype)
    return out


def rollouts_from_rows(
    inputs, outputs, tokenizer, variant: str, max_tokens: int | None = None, prefill: str = ""
) -> list[Rollout]:
    """One :class:`Rollout` per row. ``inputs``: the rows as sent to the rollout manager (for
    uid, question, gold, data source); ``outputs``: the same rows as generated. A response of
    ``max_tokens`` tokens (default: the response width) finished on the length limit.
    ``prefill``: the text the rows' prompts ended with (``pasr.prefill_think``), put in front of
    each response's text as the local engine puts it (its tokens are prompt, not counted)."""
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} input rows but {len(outputs)} output rows")
    nt = inputs.non_tensor_batch
    n = len(inputs)
    lengths = response_lengths(outputs).tolist()
    max_len = min(outputs.batch["responses"].shape[1], max_tokens or outputs.batch["responses"].shape[1])
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
                text=decode_response(tokenizer, responses[i, :length].tolist(), prefill),
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


def write_scores(rows, scores: Sequence[float], extra: dict[str, np.ndarray]):
    """Each row's score in ``rm_scores`` at its last valid response token and ``extra`` as verl's
    ``reward_extra_info`` (numeric columns, one entry per row); ``rows`` is changed and returned."""
    if len(rows) != len(scores) or any(len(v) != len(rows) for v in extra.values()):
        raise ValueError(f"{len(rows)} rows but {len(scores)} scores or extra columns of another length")
    rows.batch["rm_scores"] = _last_token_scores(rows, scores)
    rows.non_tensor_batch = {**rows.non_tensor_batch, **extra}
    rows.meta_info = {**rows.meta_info, "reward_extra_keys": list(extra)}
    return rows


def write_train_scores(rows, scores: Sequence[float], mask: Sequence[bool], extra: dict[str, np.ndarray]):
    """:func:`write_scores` for rows to train on: a row whose ``mask`` entry is False gets a zero
    ``response_mask`` and ``pasr_trained`` False (no loss, outside its group's GRPO statistics:
    :mod:`recipe.advantages`)."""
    if len(mask) != len(rows):
        raise ValueError(f"{len(rows)} rows but {len(mask)} mask entries")
    trained = np.asarray(mask, dtype=bool)
    response_mask = _response_mask(rows)
    write_scores(rows, scores, extra)
    rows.batch["response_mask"] = response_mask * torch.from_numpy(trained).to(response_mask.dtype)[:, None]
    rows.non_tensor_batch = {**rows.non_tensor_batch, TRAINED: trained}
    return rows


def apply_train_scores(rows, records: Sequence[RolloutRecord], scores: Sequence[float], mask: Sequence[bool]):
    """Write the step core's ``scores`` and ``mask`` (:func:`recipe.scoring.group_scores`) into
    the refine ``rows`` (in place) and return them. ``records``: the rows' records, same order."""
    if not len(rows) == len(records) == len(scores) == len(mask):
        raise ValueError(f"{len(rows)} rows but {len(records)} records, {len(scores)} scores, {len(mask)} mask entries")
    return write_train_scores(rows, scores, mask, _extra_info(records))


def apply_validation_scores(rows, records: Sequence[RolloutRecord]):
    """Validation: the score of a row is its judge accuracy (0 on a judge error, counted in the
    ``judge_error`` extra key), so ``val-core/<data_source>/reward`` reads as accuracy."""
    if len(rows) != len(records):
        raise ValueError(f"{len(rows)} rows but {len(records)} records")
    return write_scores(rows, [r.acc if r.acc is not None else 0.0 for r in records], _extra_info(records))
