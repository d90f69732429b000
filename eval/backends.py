"""Generation backends of ``pasr eval``: one interface, two engines.

* ``hf``: transformers on CPU (or one GPU) through :mod:`runtime.hf_generate`, the same batched,
  length-grouped, left-padded generation the local training engine uses.
* ``vllm``: the vLLM offline engine on GPU. ``vllm`` is imported only when this backend loads,
  so everything else runs on a machine without it.

A backend turns a list of chats into one :class:`Completion` per chat, in order. Output token
counts always come from the generated token ids (EOS included when the model stopped), never
from re-tokenising text. Tests inject their own object with the same ``generate`` method.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

Chat = Sequence[dict]

BACKENDS = ("hf", "vllm")


@dataclass
class GenParams:
    """Sampling settings of one eval run (shared by all passes of a method)."""

    max_new_tokens: int = 1500
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0


@dataclass
class Completion:
    text: str
    n_tokens: int  # generated token ids, EOS included when finish_reason == "stop"
    finish_reason: str | None = None  # stop | length


class Backend(Protocol):
    name: str

    def load(self) -> None:
        """Load the model; raises :class:`BackendError` with one clear line on failure."""

    def generate(self, chats: Sequence[Chat], params: GenParams, on_finished=None) -> list[Completion]:
        """One completion per chat; ``on_finished(n)`` hears of completions as they finish (a
        progress bar's tick), at the latest when the call returns."""


class BackendError(RuntimeError):
    """The backend cannot be used (model missing, vllm not installed, ...); one clear line."""


def check_local_path(spec: str) -> None:
    """A spec that can only be a local path (three or more parts, or its parent folder exists
    here) but is missing is a :class:`BackendError` at once, instead of being tried as a hub name
    (which, offline, retries for a minute)."""
    from runtime.model_loading import EMBEDDED_ALIASES

    path = Path(spec).expanduser()
    if spec not in EMBEDDED_ALIASES and not path.exists():
        parts = [p for p in spec.strip("/").split("/") if p]
        if len(parts) > 2 or (len(parts) == 2 and path.parent.is_dir()):
            raise BackendError(f"model path does not exist: {spec}")


def run_folder_problem(spec: str) -> str | None:
    """Why ``spec`` names a training run's folder rather than a model, or None. Without it such a
    folder was "model folder RUN has no config.json", blaming a file no run folder has. A local
    run (``pasr train``: ``config.yaml``, ``checkpoints/``) is pointed at its newest checkpoint, or
    said to have none yet; a verl run's folder (no ``global_step_N`` yet) is said to have none."""
    from runtime.hf_export import is_verl_checkpoint
    from runtime.model_loading import LATEST, ModelNotFoundError, checkpoint_named_by

    path = Path(spec).expanduser()
    if not path.is_dir() or (path / "config.json").is_file() or is_verl_checkpoint(path):
        return None
    local_run = (path / "config.yaml").is_file() or (path / "checkpoints").is_dir()
    if not (local_run or (path / "metrics.jsonl").is_file() or (path / "rollouts").is_dir()):
        return None
    pointer = path / "checkpoints" / LATEST
    try:
        named = checkpoint_named_by(pointer) if pointer.is_file() else None
    except ModelNotFoundError:  # a broken pointer: loading it says why
        named = None
    if named is not None:
        return f"{spec} is a training run's folder, not a model: evaluate its newest checkpoint, --model {pointer}"
    return (
        f"{spec} is a training run's folder with no checkpoint yet: evaluate it once it has saved one "
        f"({pointer if local_run else 'its global_step_N'}), or give a model folder or hub name"
    )


def resolve_model(spec: str) -> str:
    """:func:`runtime.model_loading.resolve_model_path`, after :func:`check_local_path` and
    :func:`run_folder_problem`."""
    from runtime.model_loading import ModelNotFoundError, resolve_model_path

    check_local_path(spec)
    if why := run_folder_problem(spec):
        raise BackendError(why)
    try:
        return resolve_model_path(spec)
    except ModelNotFoundError as exc:
        raise BackendError(str(exc)) from None


class HFBackend:
    """transformers generation via :func:`runtime.hf_generate.generate_chats`."""

    name = "hf"

    def __init__(
        self,
        model: str,
        batch_size: int = 32,
        dtype: str = "auto",  # auto: measured on the device, as training decides it (runtime/cpu_dtype.py)
        device: str = "auto",  # auto | cpu | cuda (runtime.model_loading.resolve_device)
        threads: int | None = None,
        attention: str = "grouped",
        seed: int = 0,
        max_new_tokens: int | None = None,  # checked against the model's context at load
    ):
        from runtime.gqa_attention import ATTENTIONS
        from runtime.model_loading import resolve_device

        if attention not in ATTENTIONS:
            raise BackendError(f"unknown attention {attention!r}: {' or '.join(ATTENTIONS)}")
        try:
            self.device = resolve_device(device)
        except ValueError as exc:
            raise BackendError(str(exc)) from None
        self.model_spec = model
        self.batch_size = batch_size
        self.threads = threads
        self.attention = attention
        self.seed = seed
        self.dtype = dtype
        self.max_new_tokens = max_new_tokens
        self.context: int | None = None  # the model's context length, once loaded
        self.model = None
        self.tokenizer = None
        self.model_path: str | None = None
        self._decided: dict | None = None

    def decide(self) -> dict:
        """What this machine makes of the settings left to ``auto``, without loading the model:
        ``{"device", "dtype", "threads"}``, the probes of :mod:`runtime.cpu_dtype` run once here.
        They change answers (greedy answers differed on 19 of 40 questions between fp32 and bf16),
        so ``pasr eval`` keeps them in its resume fingerprint; :meth:`load` uses them."""
        if self._decided is None:
            # the rule training's model.threads / model.rollout_dtype follow (runtime.cpu_dtype)
            from runtime.cpu_dtype import decide_threads, resolve_dtype

            threads = decide_threads(self.threads, self.device)
            dtype = self.dtype
            if dtype in (None, "auto"):
                dtype = resolve_dtype("auto", device=self.device).dtype
                print(f"hf backend: {dtype} on {self.device} (--dtype to choose)", file=sys.stderr)
            self._decided = {"device": self.device, "dtype": dtype, "threads": threads}
        return dict(self._decided)

    def load(self) -> None:
        if self.model is not None:
            return
        import torch

        from runtime.model_loading import ModelLoadError, load_model_and_tokenizer

        resolve_model(self.model_spec)  # fail fast on a missing local path
        decided = self.decide()
        if decided["threads"]:
            from runtime.cpu_dtype import set_threads

            set_threads(decided["threads"])  # as decided (again: a test or a caller may have changed it)
        torch.manual_seed(self.seed)  # sampling (--samples K) draws from torch's global generator
        try:
            self.model, self.tokenizer, self.model_path = load_model_and_tokenizer(
                self.model_spec, dtype=decided["dtype"], device=self.device
            )
        except ModelLoadError as exc:  # missing, offline hub name, no weights, broken config.json, ...
            raise BackendError(str(exc)) from None
        self.model.eval()
        from runtime.gqa_attention import use_attention

        use_attention(self.model, self.attention)  # grouped: batched decoding without copying the KV cache
        self._check_context()

    def _check_context(self) -> None:
        """The model's context length kept for :meth:`generate` (a prompt that does not fit is
        an error of its own, a response stops at the context's end), and ``max_new_tokens``
        that cannot fit with any prompt refused before anything is generated."""
        from runtime.context_length import ContextLengthError, check_new_tokens, context_length

        self.context = context_length(self.model.config)
        try:
            if self.max_new_tokens is not None:
                check_new_tokens(self.max_new_tokens, self.context)
        except ContextLengthError as exc:
            raise BackendError(f"model {self.model_spec}: {exc}") from None

    def generate(
        self, chats: Sequence[Chat], params: GenParams, on_finished=None, prefill: str = ""
    ) -> list[Completion]:
        """``prefill``: text that starts every response, as the local engine's ``<think>``
        (``pasr.prefill_think``): appended to the prompt, so its tokens are not counted, and
        the text returned begins with it. ``pasr eval`` itself passes none."""
        from runtime.hf_generate import SamplingParams, generate_chats

        self.load()
        if not chats:
            return []
        sp = SamplingParams(
            max_new_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            do_sample=not params.greedy,
        )
        gens = generate_chats(
            self.model,
            self.tokenizer,
            chats,
            sp,
            batch_size=self.batch_size,
            prefill=prefill,
            on_finished=on_finished,
            context=self.context,
        )
        return [Completion(g.text, g.n_tokens, g.finish_reason) for g in gens]


class VLLMBackend:
    """vLLM offline engine: ``LLM.chat`` applies the model's chat template, like the hf backend.

    ``llm`` may be passed in (tests hand a fake object); otherwise :meth:`load` builds
    ``vllm.LLM`` from the resolved model path.
    """

    name = "vllm"

    def __init__(
        self,
        model: str,
        llm=None,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        dtype: str = "auto",
        seed: int = 0,
        enforce_eager: bool | None = None,
    ):
        self.model_spec = model
        self.llm = llm
        self.enforce_eager = enforce_eager  # None: eager_by_default(the model) at load
        self.engine_kwargs = {
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "dtype": dtype,
            "seed": seed,
        }
        if max_model_len:
            self.engine_kwargs["max_model_len"] = max_model_len
        self.model_path: str | None = None
        self._vllm = None

    def _import(self):
        if self._vllm is None:
            try:
                import vllm
            except ImportError:
                raise BackendError(
                    "the vllm backend needs the vllm package and a GPU (pip install -e '.[gpu]' in the repository); "
                    "on CPU use --backend hf"
                ) from None
            self._vllm = vllm
        return self._vllm

    def load(self) -> None:
        vllm = self._import()
        if self.llm is not None:
            return
        self.model_path = resolve_model(self.model_spec)
        eager = eager_by_default(self.model_path) if self.enforce_eager is None else self.enforce_eager
        self.engine_kwargs["enforce_eager"] = eager
        try:
            self.llm = vllm.LLM(model=self.model_path, **self.engine_kwargs)
        except (OSError, ValueError) as exc:
            from runtime.model_loading import first_line

            raise BackendError(f"vllm cannot load model {self.model_spec!r}: {first_line(exc)}") from None

    def sampling_params(self, params: GenParams):
        vllm = self._import()
        if params.greedy:
            return vllm.SamplingParams(n=1, max_tokens=params.max_new_tokens, temperature=0.0, top_p=1.0)
        return vllm.SamplingParams(
            n=1, max_tokens=params.max_new_tokens, temperature=params.temperature, top_p=params.top_p
        )

    def generate(
        self, chats: Sequence[Chat], params: GenParams, on_finished=None, prefill: str = ""
    ) -> list[Completion]:
        """``prefill``: text that starts every response (the local engine's ``<think>``): the
        prompts are then rendered as the local engine renders them
        (:func:`runtime.hf_generate.render_prompts`: the model's chat template, then the
        prefill) and sent as token ids, and the text returned begins with it, as the hf
        backend's does."""
        self.load()
        if not chats:
            return []
        # One request per chat (K samples of a question are K identical chats: prefix caching
        # shares their prompt, and resume stays per sample).
        if prefill:
            from runtime.hf_generate import render_prompts

            prompts = render_prompts(self.llm.get_tokenizer(), chats, prefill)
            outputs = self.llm.generate(
                [{"prompt_token_ids": ids} for ids in prompts], self.sampling_params(params), use_tqdm=False
            )
        else:
            outputs = self.llm.chat([list(c) for c in chats], self.sampling_params(params), use_tqdm=False)
        if len(outputs) != len(chats):
            raise RuntimeError(f"vllm returned {len(outputs)} outputs for {len(chats)} prompts")
        result = []
        for out in outputs:
            best = out.outputs[0]
            result.append(Completion(prefill + best.text, len(best.token_ids), best.finish_reason))
        if on_finished is not None:  # LLM.chat and LLM.generate return the whole batch at once
            on_finished(len(result))
        return result


@dataclass(frozen=True)
class LocalRunAnswers:
    """How a local ``pasr train`` run had its model answer: the ``<think>`` prefill
    (``pasr.prefill_think``) and the refine and plain prompts (``pasr.prompts.*``)."""

    prefill_think: bool
    refine_prompt: str
    plain_prompt: str


def local_run_answers(model_path: str | Path) -> LocalRunAnswers | None:
    """How the local run that wrote checkpoint ``model_path`` (``RUN/checkpoints/step_N``, or
    the ``RUN/checkpoints/latest`` file naming one) answered, read from ``RUN/config.yaml``;
    None for anything else (a hub name, an exported folder, a verl checkpoint). Why ``pasr eval`` asks: a model trained
    after the ``<think>`` prefill mostly does not open the think block without it (a 60-step demo warm-up scored 10% of
    240 training problems without it and 61% with it, its run's CPU prompts both times)."""
    import yaml

    config = Path(model_path).resolve().parent.parent / "config.yaml"
    try:
        saved = yaml.safe_load(config.read_text()) if config.is_file() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(saved, dict) or "warmup" not in saved or not isinstance(saved.get("rollout"), dict):
        return None  # not a local engine run's config
    from recipe.local_engine.config import LocalTrainConfig

    default = LocalTrainConfig()  # a key the file leaves out (pasr train writes them all) has its one default
    pasr = saved.get("pasr") or {}
    prompts = pasr.get("prompts") or {}
    # a run saved before the key moved to pasr.prefill_think (recipe/retired_keys.py) has it under rollout
    think = pasr.get("prefill_think", saved["rollout"].get("prefill_think", default.pasr.prefill_think))
    return LocalRunAnswers(
        bool(think),
        str(prompts.get("refine", default.pasr.prompts.refine)),
        str(prompts.get("plain", default.pasr.prompts.plain)),
    )


def starts_answer(chat: Chat, systems: frozenset[str]) -> bool:
    """Whether ``chat`` asks for an answer under one of the trained system prompts (``systems``):
    the turns the local engine starts with ``<think>``."""
    return bool(chat) and chat[0].get("role") == "system" and chat[0].get("content") in systems


class AnswerPrefill:
    """A backend (the class this is mixed into) with the local engine's assistant prefill
    (``<think>``) on the chats that :func:`starts_answer` picks (answers under the trained
    prompts); other chats (Self-Refine's feedback, scoring, RRR's passes) get none, as the local
    engine gives them none."""

    def __init__(self, model: str, prefill: str, systems: frozenset[str], **kwargs):
        super().__init__(model, **kwargs)
        self.prefill, self.systems = prefill, systems

    def generate(self, chats, params, on_finished=None, prefill: str = ""):
        if not self.prefill:
            return super().generate(chats, params, on_finished)
        marks = [starts_answer(c, self.systems) for c in chats]
        out: list = [None] * len(chats)
        for mark in (True, False):
            idx = [i for i, m in enumerate(marks) if m == mark]
            if idx:
                gens = super().generate(
                    [chats[i] for i in idx], params, on_finished, prefill=self.prefill if mark else ""
                )
                for i, g in zip(idx, gens):
                    out[i] = g
        return out


class AnswerPrefillBackend(AnswerPrefill, HFBackend):
    """The hf backend with the ``<think>`` prefill on answers (:class:`AnswerPrefill`)."""


class VLLMAnswerPrefillBackend(AnswerPrefill, VLLMBackend):
    """The vllm backend with the ``<think>`` prefill on answers (:class:`AnswerPrefill`)."""


EAGER_MAX_WEIGHT_BYTES = 2 * 1024**3


def eager_by_default(model_path: str | Path) -> bool:
    """Whether vLLM should skip CUDA-graph capture and torch.compile for this model: yes for a
    small one (weight files under 2 GiB: the 135M default, 0.5B models). Both are one-off start-up
    work (a minute or more on an H100, against seconds of decoding for a small model's evaluation)
    that pays back only over long runs of a large model. A hub name or a folder whose files cannot
    be sized keeps vLLM's own default (graphs)."""
    folder = Path(model_path)
    if not folder.is_dir():
        return False
    sizes = [p.stat().st_size for p in folder.iterdir() if p.suffix in (".safetensors", ".bin", ".pt", ".gguf")]
    return bool(sizes) and sum(sizes) < EAGER_MAX_WEIGHT_BYTES


def build_backend(name: str, model: str, prefill: str = "", systems: frozenset[str] = frozenset(), **kwargs) -> Backend:
    """``hf`` or ``vllm``; keyword arguments a backend does not take are ignored. ``prefill``:
    text that starts every answer under the ``systems`` prompts (:class:`AnswerPrefill`)."""
    if name == "hf":
        keys = ("batch_size", "dtype", "device", "threads", "attention", "seed", "max_new_tokens")
        chosen = {k: v for k, v in kwargs.items() if k in keys and v is not None}
        return AnswerPrefillBackend(model, prefill, systems, **chosen) if prefill else HFBackend(model, **chosen)
    if name == "vllm":
        keys = ("tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "dtype", "seed", "enforce_eager")
        chosen = {k: v for k, v in kwargs.items() if k in keys and v is not None}
        return VLLMAnswerPrefillBackend(model, prefill, systems, **chosen) if prefill else VLLMBackend(model, **chosen)
    raise BackendError(f"unknown backend {name!r}: choose one of {', '.join(BACKENDS)}")
