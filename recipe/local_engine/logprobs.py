"""Token log-probabilities of responses, computed only where they are needed.

A causal LM's forward pass returns logits for every position over the whole vocabulary
(49k for SmolLM2); over the prompt those logits are never used, and on CPU they dominated
the update's time and memory in the prototype. Here the transformer body runs over the
whole sequence, but the output layer and log-softmax run only over the hidden states that
predict *valid response tokens*.

A PASR step trains ``n_refine`` responses to each query's one prompt, and the prompt (about 72
tokens on the CPU presets) is longer than most responses: each distinct prompt is run once and
its keys and values are gathered to its rows (:func:`_shared_prompt_hidden`,
:mod:`runtime.prompt_prefill`), the same computation (and gradient) as running it once per row,
at about half the cost.

The warm-up's rows rarely share a whole prompt, and padding them to the longest prompt plus the
longest response wasted about a quarter of its tokens: :func:`concatenated_response_logprobs`
lays them end to end in one sequence instead (their shared prefixes once, then each row, with a
mask that keeps each row to itself and its prefix), the same computation without the padding,
but with attention over the whole sequence; :func:`end_to_end_pays` says which of the two costs
less for a batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime.gqa_attention import NAME as GROUPED
from runtime.prompt_prefill import decoder, prefill, prefill_tokens, shared_prefixes


@dataclass
class PackedBatch:
    """Left-padded prompts followed by right-padded responses, as verl lays them out."""

    input_ids: torch.Tensor  # (B, P + R)
    attention_mask: torch.Tensor  # (B, P + R)
    position_ids: torch.Tensor  # (B, P + R)
    responses: torch.Tensor  # (B, R)
    response_mask: torch.Tensor  # (B, R) 1 on sampled tokens (EOS included)

    @property
    def prompt_width(self) -> int:
        return self.input_ids.shape[1] - self.responses.shape[1]

    def to(self, device) -> "PackedBatch":
        """The same batch on ``device`` (itself when already there): packing happens on the CPU."""
        if self.input_ids.device == torch.device(device):
            return self
        return PackedBatch(*(t.to(device) for t in (self.input_ids, self.attention_mask, self.position_ids,
                                                     self.responses, self.response_mask)))


def pack(prompts: list[list[int]], responses: list[list[int]], pad_id: int) -> PackedBatch:
    if len(prompts) != len(responses):
        raise ValueError("prompts and responses differ in length")
    p_width = max(len(p) for p in prompts)
    r_width = max(1, max(len(r) for r in responses))
    bsz = len(prompts)
    input_ids = torch.full((bsz, p_width + r_width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    resp_mask = torch.zeros((bsz, r_width), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        input_ids[i, p_width - len(p) : p_width] = torch.tensor(p)
        attention[i, p_width - len(p) : p_width] = 1
        if r:
            input_ids[i, p_width : p_width + len(r)] = torch.tensor(r)
            attention[i, p_width : p_width + len(r)] = 1
            resp_mask[i, : len(r)] = 1
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    return PackedBatch(input_ids, attention, position_ids, input_ids[:, p_width:], resp_mask)


def response_logprobs(model, batch: PackedBatch, temperature: float = 1.0) -> torch.Tensor:
    """(B, R) log-probs of the response tokens under ``model`` (0 where masked).

    Matches verl's actor: logits are divided by the sampling temperature before the softmax.
    Runs where ``model`` is; so is the result.
    """
    body = decoder(model)
    batch = batch.to(model.device)
    p = batch.prompt_width
    r = batch.responses.shape[1]
    predicting = _shared_prompt_hidden(body, batch)
    if predicting is None:
        hidden = body(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            use_cache=False,
        ).last_hidden_state
        predicting = hidden[:, p - 1 : p + r - 1]  # position t predicts token t + 1
    valid = batch.response_mask.bool()
    token_lp = _token_logprobs(model, predicting[valid], batch.responses[valid], temperature)
    out = torch.zeros(batch.responses.shape, dtype=token_lp.dtype, device=token_lp.device)
    out[valid] = token_lp
    return out


def _token_logprobs(model, predicting: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probs of ``targets`` from the hidden states that predict them: the output layer and
    log-softmax over just those rows, in fp32."""
    logits = model.get_output_embeddings()(predicting).float()
    if temperature != 1.0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def _shared_prompt_hidden(body, batch: PackedBatch) -> torch.Tensor | None:
    """The hidden states that predict the response tokens, (B, R), with each distinct prompt
    run once (:func:`runtime.prompt_prefill.prefill`): its last hidden state predicts the first
    response token and its keys and values (gathered to its rows, so gradients from every row
    add up on the one pass) serve the responses. None when no prompt repeats in the batch.

    Prefixes shared by distinct prompts are not run once here: a micro-batch holds two or three
    distinct prompts, and the few tokens that would save cost more than the extra pass (the
    update ran 5% slower with them, measured while building ``benchmarks/prompt_prefill_speed``)."""
    p = batch.prompt_width
    out = prefill(body, batch.input_ids[:, :p], batch.attention_mask[:, :p], 0) if p >= 1 else None
    if out is None:
        return None
    cache, last = out
    responses = body(
        input_ids=batch.input_ids[:, p:],
        attention_mask=batch.attention_mask,  # the prompt's padding, then the response's
        position_ids=batch.position_ids[:, p:],
        past_key_values=cache,
        use_cache=True,
    ).last_hidden_state
    return torch.cat([last[:, None], responses[:, :-1]], dim=1)


def takes_explicit_mask(config) -> bool:
    """Whether the model's attention takes an explicit (4-D boolean) mask: SDPA and its grouped
    variant do; eager attention, for one, expects an additive one."""
    return getattr(config, "_attn_implementation", None) in ("sdpa", GROUPED)


def end_to_end_prefixes(config, prompts: list[list[int]]) -> list[int]:
    """Each row's prefix laid once in an end-to-end sequence (:func:`concatenated_response_logprobs`,
    and what :func:`end_to_end_pays` counts): the shared prefixes where the attention takes the
    mask that lets rows see them, else none."""
    return shared_prefixes(prompts) if takes_explicit_mask(config) else [0] * len(prompts)


def concatenated_response_logprobs(model, prompts: list[list[int]], responses: list[list[int]]) -> torch.Tensor:
    """Log-probs of every response token (rows in order, tokens in order; 1-D), with the rows'
    prompt + response sequences laid end to end in one unpadded sequence.

    The prefixes the prompts share (:func:`runtime.prompt_prefill.shared_prefixes`: the template
    and system prompt) come first, once each; then each row's rest of its prompt and its
    response, position ids continuing from its prefix. An explicit mask lets a token see its
    own row's earlier tokens and its row's prefix, nothing else: exactly what it sees in a
    padded batch, with no compute on padding and none on a prefix twice. Where the model's
    attention takes no such mask (not SDPA) no prefix is shared and each row's position ids
    start again at 0, which transformers turns into the same block-diagonal mask itself.
    """
    if len(prompts) != len(responses):
        raise ValueError("prompts and responses differ in length")
    masked = takes_explicit_mask(model.config)
    shared = end_to_end_prefixes(model.config, prompts)
    ids: list[int] = []
    positions: list[int] = []
    block: list[int] = []  # which piece each token belongs to: a shared prefix, or a row
    sees: list[int] = []  # the shared prefix a token may also attend to (-1: none)
    prefix_block: dict[tuple[int, ...], int] = {}
    for p, n in zip(prompts, shared):
        if n and tuple(p[:n]) not in prefix_block:
            prefix_block[tuple(p[:n])] = len(prefix_block)
            ids += p[:n]
            positions += range(n)
            block += [prefix_block[tuple(p[:n])]] * n
            sees += [-1] * n
    predicting, targets = [], []
    for row, (p, r, n) in enumerate(zip(prompts, responses, shared)):
        start = len(ids)
        ids += [*p[n:], *r]
        positions += range(n, len(p) + len(r))
        block += [len(prefix_block) + row] * (len(p) - n + len(r))
        sees += [prefix_block[tuple(p[:n])] if n else -1] * (len(p) - n + len(r))
        predicting += range(start + len(p) - n - 1, start + len(p) - n + len(r) - 1)  # position t predicts t + 1
        targets += r
    device = next(model.parameters()).device
    kwargs = {}
    if masked:
        b, v = torch.tensor(block, device=device), torch.tensor(sees, device=device)
        causal = torch.ones(len(ids), len(ids), dtype=torch.bool, device=device).tril()
        kwargs["attention_mask"] = (causal & ((b[None, :] == b[:, None]) | (b[None, :] == v[:, None])))[None, None]
    hidden = decoder(model)(
        input_ids=torch.tensor([ids], device=device),
        position_ids=torch.tensor([positions], device=device),
        use_cache=False,
        **kwargs,
    ).last_hidden_state[0]
    return _token_logprobs(model, hidden[torch.tensor(predicting, device=device)], torch.tensor(targets, device=device))


def end_to_end_pays(config, prompts: list[list[int]], responses: list[list[int]]) -> bool:
    """Whether laying these rows end to end costs fewer FLOPs than padding them into a batch.

    End to end runs each shared prompt prefix once where the attention takes an explicit mask
    (:mod:`runtime.prompt_prefill`) and drops the padding (the linear layers' cost is per
    token) but attends over the whole sequence (quadratic in its length); the padded batch
    prefills each distinct prompt once, then pads every response to the longest. Counted
    from the model's shapes: per token ``2 * layers * (2 h^2 + 2 h kv + 3 h ffn)``, per
    attending pair ``4 * layers * h``; a padded row's attention counts half its square
    (causal). Short rows of mixed lengths (the PASR warm-up) gain; long rows of similar lengths
    (Countdown's RRR warm-up, about 230 tokens) stay padded.
    """
    h, layers = config.hidden_size, config.num_hidden_layers
    kv = config.num_key_value_heads * getattr(config, "head_dim", h // config.num_attention_heads)
    per_token = 2 * layers * (2 * h * h + 2 * h * kv + 3 * h * config.intermediate_size)
    per_pair = 4 * layers * h
    shared = end_to_end_prefixes(config, prompts)
    prefixes = {tuple(p[:n]) for p, n in zip(prompts, shared) if n}
    total = sum(map(len, prefixes)) + sum(len(p) - n + len(r) for p, r, n in zip(prompts, responses, shared))
    p_width, r_width = max(map(len, prompts)), max(map(len, responses))
    padded = prefill_tokens(prompts, [0] * len(prompts)) * (per_token + p_width / 2 * per_pair)
    padded += len(prompts) * r_width * (per_token + (p_width + r_width / 2) * per_pair)
    return total * (per_token + total * per_pair) < padded
