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

An update's micro-batches take this one step further (:class:`PromptPass`): the batch's distinct
prompts run once for the whole update, and the micro-batches are cut by response length instead
of by query, each padded only to its own longest response. Padding every micro-batch to the
batch's longest response (what slicing a padded batch gives) cost a PASR step's log-probs and
update a quarter of their positions (refining rows of 60-96 tokens beside 20-token ones).

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
from transformers import DynamicCache

from runtime.gqa_attention import NAME as GROUPED
from runtime.hf_generate import length_batches
from runtime.prompt_prefill import decoder, positions, prefill, prefill_tokens, shared_prefixes


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

    def to(self, device) -> PackedBatch:
        """The same batch on ``device`` (itself when already there): packing happens on the CPU."""
        if self.input_ids.device == torch.device(device):
            return self
        return PackedBatch(
            *(
                t.to(device)
                for t in (self.input_ids, self.attention_mask, self.position_ids, self.responses, self.response_mask)
            )
        )


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


def response_logprobs(
    model,
    batch: PackedBatch,
    temperature: float = 1.0,
    prompts: PromptPass | None = None,
    rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """(B, R) log-probs of the response tokens under ``model`` (0 where masked).

    Matches verl's actor: logits are divided by the sampling temperature before the softmax.
    Runs where ``model`` is; so is the result. The forward runs only as far as the batch's
    longest response (columns after it are padding in every row). ``prompts``: the
    :class:`PromptPass` of the batch these are ``rows`` of, which has run their prompts already;
    without it, repeated prompts of this batch run once (:func:`_shared_prompt_hidden`).
    """
    body = decoder(model)
    batch = batch.to(model.device)
    p = batch.prompt_width
    r = batch.responses.shape[1]
    width = max(1, int(batch.response_mask.sum(-1).max()))
    if prompts is not None:
        predicting = prompts.response_hidden(body, batch, rows, width)
    else:
        predicting = _shared_prompt_hidden(body, batch, width)
    if predicting is None:
        hidden = body(
            input_ids=batch.input_ids[:, : p + width],
            attention_mask=batch.attention_mask[:, : p + width],
            position_ids=batch.position_ids[:, : p + width],
            use_cache=False,
        ).last_hidden_state
        predicting = hidden[:, p - 1 : p + width - 1]  # position t predicts token t + 1
    valid = batch.response_mask[:, :width].bool()
    token_lp = _token_logprobs(model, predicting[valid], batch.responses[:, :width][valid], temperature)
    out = torch.zeros((batch.responses.shape[0], r), dtype=token_lp.dtype, device=token_lp.device)
    out[:, :width][valid] = token_lp
    return out


# At most this many rows of (rows, vocabulary) fp32 logits exist at once: 200 MB for SmolLM2's
# 49k tokens. Below it the rows' logits are one block, kept for the backward as autograd keeps
# them; above it (long rows, large micro-batches) they are computed in chunks of this many rows
# and recomputed in the backward (:class:`_ChunkedLogprobs`), which costs the output layer's
# matmul once more (about a fifth of its forward and backward on a CPU). A PASR micro-batch of
# the CPU presets (8 rows of at most 96 tokens) and a warm-up batch (about 460 response tokens)
# stay below it: there the logits are a tenth of what the transformer body keeps for the
# backward (about 1.7 MB a token for SmolLM2 in fp32), and chunking them lowered no peak
# (benchmarks/run_footprint.py, docs/local_engine.md "Memory").
LOGIT_CHUNK_ROWS = 1024


def _token_logprobs(model, predicting: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probs of ``targets`` from the hidden states that predict them: the output layer and
    log-softmax over just those rows, in fp32, at most ``LOGIT_CHUNK_ROWS`` rows of logits at a
    time (without autograd, chunk after chunk; with it, :class:`_ChunkedLogprobs`)."""
    head = model.get_output_embeddings()
    n = predicting.shape[0]
    if n > LOGIT_CHUNK_ROWS and torch.is_grad_enabled() and head.bias is None:
        return _ChunkedLogprobs.apply(predicting, head.weight, targets, temperature, LOGIT_CHUNK_ROWS)
    pieces = [
        _block_logprobs(head(predicting[s : s + LOGIT_CHUNK_ROWS]), targets[s : s + LOGIT_CHUNK_ROWS], temperature)
        for s in range(0, max(n, 1), LOGIT_CHUNK_ROWS)
    ]
    return pieces[0] if len(pieces) == 1 else torch.cat(pieces)


def _block_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


class _ChunkedLogprobs(torch.autograd.Function):
    """:func:`_token_logprobs` of many rows with one chunk of logits at a time, forward and backward.

    The forward keeps only each row's log-normaliser; the backward recomputes a chunk's logits
    (in the dtype the forward used: bf16 under autocast, as the output layer runs there) and
    turns them into the log-softmax's gradient, ``(onehot(target) - softmax) * g / temperature``,
    for the hidden states and the weight. Exact: the same logits, normalised by the same
    log-sum-exp."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature: float, chunk: int):
        dtype = _matmul_dtype(hidden)
        w = weight.to(dtype)
        out = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        lse = torch.empty_like(out)
        with torch.autocast(hidden.device.type, enabled=False):
            for s in range(0, hidden.shape[0], chunk):
                logits = _chunk_logits(hidden[s : s + chunk], w, dtype, temperature)
                lse[s : s + chunk] = torch.logsumexp(logits, dim=-1)
                out[s : s + chunk] = logits.gather(-1, targets[s : s + chunk, None]).squeeze(-1) - lse[s : s + chunk]
        ctx.save_for_backward(hidden, weight, targets, lse)
        ctx.temperature, ctx.chunk, ctx.dtype = temperature, chunk, dtype
        return out

    @staticmethod
    def backward(ctx, grad):
        hidden, weight, targets, lse = ctx.saved_tensors
        dtype, chunk = ctx.dtype, ctx.chunk
        w = weight.to(dtype)
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        grad_weight = torch.zeros_like(weight) if ctx.needs_input_grad[1] else None
        with torch.autocast(hidden.device.type, enabled=False):
            for s in range(0, hidden.shape[0], chunk):
                h, g = hidden[s : s + chunk], grad[s : s + chunk, None].float()
                d_logits = _chunk_logits(h, w, dtype, ctx.temperature).sub_(lse[s : s + chunk, None]).exp_().mul_(-g)
                d_logits.scatter_add_(-1, targets[s : s + chunk, None], g)
                if ctx.temperature != 1.0:
                    d_logits /= ctx.temperature
                d_logits = d_logits.to(dtype)
                if grad_hidden is not None:
                    grad_hidden[s : s + chunk] = d_logits @ w
                if grad_weight is not None:
                    grad_weight += (d_logits.t() @ h.to(dtype)).to(grad_weight.dtype)
        return grad_hidden, grad_weight, None, None, None


def _matmul_dtype(hidden: torch.Tensor) -> torch.dtype:
    """The dtype the output layer computes in: autocast's where it is on (bf16), else the input's."""
    device = hidden.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype


def _chunk_logits(hidden: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype, temperature: float) -> torch.Tensor:
    """fp32 logits of ``hidden`` rows, computed in ``dtype`` as the output layer computes them."""
    logits = (hidden.to(dtype) @ weight.t()).float()
    return logits.div_(temperature) if temperature != 1.0 else logits


def _shared_prompt_hidden(body, batch: PackedBatch, width: int | None = None) -> torch.Tensor | None:
    """The hidden states that predict the first ``width`` (default: all) response tokens,
    (B, width), with each distinct prompt run once (:func:`runtime.prompt_prefill.prefill`): its
    last hidden state predicts the first response token and its keys and values (gathered to its
    rows, so gradients from every row add up on the one pass) serve the responses. None when no
    prompt repeats in the batch.

    Prefixes shared by distinct prompts are not run once here: a micro-batch holds two or three
    distinct prompts, and the few tokens that would save cost more than the extra pass (the
    update ran 5% slower with them, measured while building ``benchmarks/prompt_prefill_speed``)."""
    prompts = PromptPass.run(body, batch, separate_backward=False)
    width = batch.responses.shape[1] if width is None else width
    return None if prompts is None else prompts.response_hidden(body, batch, None, width)


def _responses_after(body, batch: PackedBatch, cache, last: torch.Tensor, width: int) -> torch.Tensor:
    """(B, width) hidden states predicting the response tokens, from the prompts' KV ``cache``
    and their last hidden states ``last`` (B, hidden)."""
    p = batch.prompt_width
    responses = body(
        input_ids=batch.input_ids[:, p : p + width],
        attention_mask=batch.attention_mask[:, : p + width],  # the prompt's padding, then the response's
        position_ids=batch.position_ids[:, p : p + width],
        past_key_values=cache,
        use_cache=True,
    ).last_hidden_state
    return torch.cat([last[:, None], responses[:, :-1]], dim=1)


@dataclass
class PromptPass:
    """The prompts of a whole batch run once, for micro-batches cut by response length.

    An update cuts its rows into micro-batches (memory); cut by query, each micro-batch would
    run its few prompts and pad its responses to the longest of the batch. Here each distinct
    prompt of the batch runs once (:func:`runtime.prompt_prefill.prefill`) and every micro-batch
    of rows of similar response length (:func:`length_micro_batches`) attends to its rows' share
    of that pass. For an update, the pass's keys, values and last hidden states are handed to the
    micro-batches as leaves of their own graphs: each micro-batch's ``backward()`` stops there and
    adds its gradient to them, and :meth:`backward` then runs the prompt pass's own backward once,
    with the sum (the chain rule: the same gradients as a pass per micro-batch).

    That pass runs without a graph and again, with one, in :meth:`backward` (activation
    checkpointing of the prompt pass): its graph held beside every micro-batch's was the largest
    part of an update's peak memory after the weights (the demo's: about 1 GB of the prompts'
    activations under 1.4 GB of a micro-batch's), and the second run costs one forward of the
    distinct prompts, a few percent of an update. Both runs compute the same values, so the
    gradients are those of one pass kept whole."""

    keys: list[torch.Tensor]  # per layer: (B, kv heads, prompt width, head dim), gathered to the rows
    values: list[torch.Tensor]
    last: torch.Tensor  # (B, hidden): each row's prompt's last hidden state
    rerun: object = None  # the pass again over some rows, with a graph, for backward(): when it trains
    chunks: list[torch.Tensor] | None = None  # the rows rerun together (:func:`prompt_chunks`)

    @classmethod
    def run(cls, body, batch: PackedBatch, separate_backward: bool) -> PromptPass | None:
        """The pass over ``batch``'s prompts (None when no prompt repeats: then the rows' own
        prompts are their only use). ``separate_backward``: run it without a graph, hand the
        micro-batches leaves and run it again for :meth:`backward`; else the pass's outputs
        themselves (under autograd, gradients then flow through them in each micro-batch's own
        backward)."""
        p = batch.prompt_width
        if p < 1:
            return None
        ids, mask = batch.input_ids[:, :p], batch.attention_mask[:, :p]
        if not separate_backward:
            out = prefill(body, ids, mask, 0)
            return None if out is None else cls(*_split(out))
        with torch.no_grad():
            out = prefill(body, ids, mask, 0)
        if out is None:
            return None
        keys, values, last = _split(out)
        # the second run under the autocast of the first (backward() is called outside it)
        device = last.device.type
        enabled, dtype = torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)

        def rerun(rows: torch.Tensor):
            with torch.autocast(device, dtype=dtype, enabled=enabled):
                return _split(_prompt_prefill(body, ids[rows], mask[rows]))

        leaves = [t.requires_grad_() for t in (*keys, *values, last)]
        n = len(keys)
        return cls(leaves[:n], leaves[n : 2 * n], leaves[-1], rerun, prompt_chunks(ids, mask, PROMPT_CHUNK_TOKENS))

    def response_hidden(self, body, batch: PackedBatch, rows: torch.Tensor | None, width: int) -> torch.Tensor:
        """(len(rows), width) hidden states predicting the response tokens of ``batch``, which
        holds rows ``rows`` of the batch this pass ran (None: all of them)."""
        if rows is None:
            return _responses_after(body, batch, DynamicCache(list(zip(self.keys, self.values))), self.last, width)
        rows = torch.as_tensor(rows, device=self.last.device)
        cache = DynamicCache([(k[rows], v[rows]) for k, v in zip(self.keys, self.values)])
        return _responses_after(body, batch, cache, self.last[rows], width)

    def backward(self) -> None:
        """The prompt pass run again with its graph, and its backward with the gradients the
        micro-batches left on its outputs: a few distinct prompts at a time (:func:`prompt_chunks`),
        so only one chunk's graph exists at once."""
        leaves = [*self.keys, *self.values, self.last]
        if self.rerun is None or all(leaf.grad is None for leaf in leaves):
            return
        for rows in self.chunks:
            rows = rows.to(self.last.device)
            outs = self.rerun(rows)
            pairs = [
                (out, leaf.grad[rows])
                for out, leaf in zip((*outs[0], *outs[1], outs[2]), leaves)
                if leaf.grad is not None
            ]
            torch.autograd.backward([out for out, _ in pairs], [grad for _, grad in pairs])


# At most this many prompt tokens (distinct prompts x the batch's prompt width) run again at once
# in an update's prompt backward (:meth:`PromptPass.backward`): the graph of a pass holds about
# 1.7 MB a token for SmolLM2 in fp32, so the demo's eight 72-token prompts rerun whole held about
# 1 GB at the update's peak; three at a time hold a third of it for the same FLOPs.
PROMPT_CHUNK_TOKENS = 256


def prompt_chunks(ids: torch.Tensor, mask: torch.Tensor, max_tokens: int) -> list[torch.Tensor]:
    """Row indices of a batch's prompts (``ids``/``mask``: (B, P)) in chunks of whole distinct
    prompts, ``max_tokens // P`` of them (at least one) a chunk: rows with the same prompt stay
    together, so each chunk still runs its repeated prompts once."""
    _, inverse = torch.unique(torch.cat([ids, mask], dim=1), dim=0, return_inverse=True)
    inverse = inverse.cpu()
    per = max(1, max_tokens // ids.shape[1])
    return [
        torch.nonzero((inverse >= s) & (inverse < s + per)).flatten() for s in range(0, int(inverse.max()) + 1, per)
    ]


def _prompt_prefill(body, ids: torch.Tensor, mask: torch.Tensor):
    """:func:`runtime.prompt_prefill.prefill` of these prompts, or (when none repeats, where it
    declines) the same computation as one plain pass: (KV cache, last hidden states)."""
    out = prefill(body, ids, mask, 0)
    if out is not None:
        return out
    out = body(input_ids=ids, attention_mask=mask, position_ids=positions(mask), use_cache=True)
    return out.past_key_values, out.last_hidden_state[:, -1]


def _split(out) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """(keys per layer, values per layer, last hidden states) of a :func:`prefill` result."""
    cache, last = out
    return [layer.keys for layer in cache.layers], [layer.values for layer in cache.layers], last


def length_micro_batches(response_mask: torch.Tensor, size: int) -> list[torch.Tensor]:
    """Row indices (ascending) in micro-batches of ``size`` rows of similar response length
    (:func:`runtime.hf_generate.length_batches`): each is padded only to its own longest response."""
    return [torch.tensor(sorted(b)) for b in length_batches(response_mask.sum(-1).tolist(), size)]


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
