"""Token log-probabilities of responses, computed only where they are needed.

A causal LM's forward pass returns logits for every position over the whole vocabulary
(49k for SmolLM2); over the prompt those logits are never used, and on CPU they dominated
the update's time and memory in the prototype. Here the transformer body runs over the
whole sequence, but the output layer and log-softmax run only over the hidden states that
predict *valid response tokens*.

A PASR step trains ``n_refine`` responses to each query's one prompt, and the prompt (about 80
tokens on the CPU presets) is longer than most responses: the prompt is run once per distinct
prompt and its keys and values are gathered to its rows (:func:`_shared_prompt_hidden`), which
is the same computation (and gradient) as running it once per row, at about half the cost.

The warm-up's rows rarely share a prompt, and padding them to the longest prompt plus the longest
response wasted about a quarter of its tokens: :func:`concatenated_response_logprobs` lays them
end to end in one sequence instead (position ids restart at each row, which transformers turns
into a block-diagonal causal mask), the same computation without the padding, but with attention
over the whole sequence; :func:`end_to_end_pays` says which of the two costs less for a batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


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
    body = _decoder(model)
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


def _decoder(model):
    """The transformer body without the output layer (whose logits are computed only where needed)."""
    return model.get_decoder() if hasattr(model, "get_decoder") else model.base_model


def _token_logprobs(model, predicting: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probs of ``targets`` from the hidden states that predict them: the output layer and
    log-softmax over just those rows, in fp32."""
    logits = model.get_output_embeddings()(predicting).float()
    if temperature != 1.0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def _shared_prompt_hidden(body, batch: PackedBatch) -> torch.Tensor | None:
    """The hidden states that predict the response tokens, (B, R), with each distinct prompt
    run once: its last hidden state predicts the first response token and its keys and values
    (gathered to its rows, so gradients from every row add up on the one prompt pass) serve
    the responses. None when no prompt repeats in the batch."""
    p = batch.prompt_width
    prompt_rows = torch.cat([batch.input_ids[:, :p], batch.attention_mask[:, :p]], dim=1)
    unique, inverse = torch.unique(prompt_rows, dim=0, return_inverse=True)
    if len(unique) == len(prompt_rows) or p < 1:
        return None
    prompt_out = body(
        input_ids=unique[:, :p],
        attention_mask=unique[:, p:],
        position_ids=(unique[:, p:].cumsum(-1) - 1).clamp(min=0),
        use_cache=True,
    )
    cache = prompt_out.past_key_values
    cache.batch_select_indices(inverse)
    responses = body(
        input_ids=batch.input_ids[:, p:],
        attention_mask=batch.attention_mask,  # the prompt's padding, then the response's
        position_ids=batch.position_ids[:, p:],
        past_key_values=cache,
        use_cache=True,
    ).last_hidden_state
    first = prompt_out.last_hidden_state[inverse, -1:]
    return torch.cat([first, responses[:, :-1]], dim=1)


def concatenated_response_logprobs(model, prompts: list[list[int]], responses: list[list[int]]) -> torch.Tensor:
    """Log-probs of every response token (rows in order, tokens in order; 1-D), with the rows'
    prompt + response sequences laid end to end in one unpadded sequence.

    Each row's position ids start again at 0, so transformers builds a block-diagonal causal
    mask from them (``find_packed_sequence_indices``; no attention mask is passed): a token
    sees exactly its own row's earlier tokens, as in a padded batch, and no compute goes to
    padding.
    """
    if len(prompts) != len(responses):
        raise ValueError("prompts and responses differ in length")
    ids, positions, predicting, targets = [], [], [], []
    for p, r in zip(prompts, responses):
        start = len(ids)
        ids += [*p, *r]
        positions += range(len(p) + len(r))
        predicting += range(start + len(p) - 1, start + len(p) + len(r) - 1)  # position t predicts t + 1
        targets += r
    device = next(model.parameters()).device
    hidden = _decoder(model)(
        input_ids=torch.tensor([ids], device=device),
        position_ids=torch.tensor([positions], device=device),
        use_cache=False,
    ).last_hidden_state[0]
    return _token_logprobs(model, hidden[torch.tensor(predicting, device=device)], torch.tensor(targets, device=device))


def end_to_end_pays(config, prompts: list[list[int]], responses: list[list[int]]) -> bool:
    """Whether laying these rows end to end costs fewer FLOPs than padding them into a batch.

    End to end drops the padding (the linear layers' cost is per token) but attends over the
    whole sequence (quadratic in its length). Counted from the model's shapes: per token
    ``2 * layers * (2 h^2 + 2 h kv + 3 h ffn)``, per attending pair ``4 * layers * h``; a padded
    row's attention counts half its square (causal), which matched the measured timings
    (``benchmarks/warmup_speed``: 1.08x measured, 1.11x counted on the local defaults). Short
    rows of mixed lengths (the PASR warm-up) gain; long rows of similar lengths (Countdown's
    RRR warm-up, about 230 tokens) would lose about 1%, so they stay padded.
    """
    h, layers = config.hidden_size, config.num_hidden_layers
    kv = config.num_key_value_heads * getattr(config, "head_dim", h // config.num_attention_heads)
    per_token = 2 * layers * (2 * h * h + 2 * h * kv + 3 * h * config.intermediate_size)
    per_pair = 4 * layers * h
    total = sum(map(len, prompts)) + sum(map(len, responses))
    width = max(map(len, prompts)) + max(map(len, responses))
    padded = len(prompts) * width * (per_token + width / 2 * per_pair)
    return total * (per_token + total * per_pair) < padded
