"""What a ``pasr eval`` run is set to do: :class:`EvalConfig`, its validation and its resume
fingerprint (:meth:`EvalConfig.settings`), and :class:`EvalError`, the one-line failure that
``pasr eval`` reports. The defaults the options fall back to live here as well.

Moved out of :mod:`eval.run`, which still re-exports every name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eval.backends import BACKENDS, GenParams
from eval.best_of_n import METHOD as BEST_OF_N
from eval.methods import SELECTS, MethodPrompts, Selection, check_method, check_selection
from eval.reflect_retry import METHOD as REFLECT_RETRY
from eval.self_refine import MAX_ROUNDS
from recipe.paired_tests import PAPER_TEMPERATURE
from recipe.pasr_config import JudgeConfig, PromptsConfig
from recipe.rrr_config import RrrConfig, RrrPromptsConfig
from rewards.judge_kinds import JUDGE_KINDS as JUDGE_KINDS_BUILT

JUDGE_KINDS = ("auto", *JUDGE_KINDS_BUILT)  # auto: picked per dataset
LLM_JUDGES = ("openai", "hybrid")  # the kinds that need an endpoint and a judge prompt
COUNTDOWN_DIFFICULTY = 1  # the loader's default, and the rrr preset's data.difficulty
AUTO = "auto"  # a runtime setting left to the backend (--dtype, --threads, --device)

DEFAULT_SAMPLING_TEMPERATURE = 0.6  # with --samples K > 1 (mean@K), unless --temperature is given
DEFAULT_SAMPLING_TOP_P = 0.95
# --protocol NAME: a named decoding setting in one flag. paper: the paper's reference inference
# (infer_pasr.py in the authors' repository: vLLM at temperature 0.5, top-p left at 1, one
# sample); with --samples K, accuracy is mean@K over K such samples
PROTOCOLS = {"paper": {"temperature": PAPER_TEMPERATURE, "top_p": 1.0}}
DEFAULT_VLLM_CHUNK = 512


class EvalError(ValueError):
    """An expected failure of ``pasr eval`` (bad argument, unknown dataset, missing model,
    settings mismatch on resume); its message is one line."""


@dataclass
class EvalConfig:
    model: str
    datasets: list[str]
    out: str
    method: str = "plain"
    backend: str = "hf"
    samples: int = 1
    limit: int | None = None
    max_new_tokens: int = 1500  # the paper's
    temperature: float | None = None  # None: the protocol's, else greedy for one sample, 0.6 for --samples K > 1
    top_p: float | None = None  # None: the protocol's, else 0.95 when sampling
    protocol: str | None = None  # a name of PROTOCOLS (None: the defaults above)
    seed: int = 0
    batch_size: int = 32  # hf: generation batch
    chunk_size: int | None = None  # samples per written chunk (default: see chunk())
    max_rounds: int = MAX_ROUNDS  # self-refine
    select: str | None = None  # self-refine: latest (None) | best; best-of-n: majority (None) | score
    max_score_tokens: int | None = None  # --select best/score: a scoring pass's limit (None: max_new_tokens)
    score_prompt: str | None = None  # --select best/score: the self-scoring template (None: self_score)
    # auto: countdown for Countdown datasets, rule otherwise (resolve_judge)
    judge: JudgeConfig = field(default_factory=lambda: JudgeConfig(kind="auto"))
    # an accuracy counts right answers, so the judge says right or wrong (training's reward judge,
    # pasr.prompts.judge, scores in [0, 1] as the paper's does)
    judge_prompt: str = "judge_binary"
    refine_prompt: str = PromptsConfig.refine  # pasr.prompts.*'s defaults: one for training and evaluation
    plain_prompt: str = PromptsConfig.plain
    rrr_prompts: RrrPromptsConfig = field(default_factory=RrrPromptsConfig)  # reflect-retry, as training's rrr.prompts
    max_reflection_tokens: int = RrrConfig.max_reflection_tokens  # reflect-retry: the reflection pass, as training's
    fallback_last_number: bool = False  # no <answer>/\boxed{}: judge the response's last number
    # hf: text that starts every answer under the refine and plain prompts, as a local run's
    # pasr.prefill_think starts them with "<think>" (eval.backends.AnswerPrefillBackend)
    prefill: str = ""
    retry_errors: bool = False
    progress: bool = True
    # vllm engine options
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    enforce_eager: bool | None = None  # vllm; None: eval.backends.eager_by_default
    dtype: str | None = None
    threads: int | None = None  # hf on CPU: torch threads (default: torch's choice)
    attention: str = "grouped"  # hf: grouped (GQA without KV copies, runtime/gqa_attention.py) | sdpa
    device: str = "auto"  # hf: auto (the GPU torch sees, else the CPU) | cpu | cuda
    countdown_difficulty: int = COUNTDOWN_DIFFICULTY  # --dataset countdown: data.countdown.LEVELS (3/4/5 numbers)

    def gen_params(self) -> GenParams:
        preset = PROTOCOLS.get(self.protocol or "", {})
        temp = self.temperature if self.temperature is not None else preset.get("temperature")
        if temp is None:
            temp = DEFAULT_SAMPLING_TEMPERATURE if self.samples > 1 else 0.0
        top_p = self.top_p if self.top_p is not None else preset.get("top_p", DEFAULT_SAMPLING_TOP_P)
        top_p = 1.0 if temp <= 0 else top_p
        return GenParams(
            max_new_tokens=self.max_new_tokens, temperature=float(temp), top_p=float(top_p), seed=self.seed
        )

    @property
    def records_per_question(self) -> int:
        """Scored samples per question: ``--samples`` (mean@K), except for best-of-n, whose
        ``--samples N`` candidates make one answer."""
        return 1 if self.method == BEST_OF_N else self.samples

    def selection(self) -> Selection:
        """What self-refine and best-of-n need to choose their answer (``--select``)."""
        return Selection(
            select=self.select,
            candidates=self.samples if self.method == BEST_OF_N else 1,
            score_tokens=self.max_score_tokens,
            judge_kind=self.judge.kind,
            fallback_last_number=self.fallback_last_number,
        )

    def chunk(self) -> int:
        if self.chunk_size:
            return self.chunk_size
        if self.backend == "vllm":
            return DEFAULT_VLLM_CHUNK
        if self.method == BEST_OF_N:  # N generations per sample: one generation batch of candidates
            return max(1, self.batch_size // self.samples)
        # hf: one generation batch per chunk; Self-Refine's and reflect-retry's later passes
        # only take the questions still going, so their chunks are larger
        return self.batch_size * {"self-refine": 4, REFLECT_RETRY: 2}.get(self.method, 1)

    def validate(self) -> None:
        problems = []
        try:
            check_method(self.method)
        except ValueError as exc:
            problems.append(str(exc))
        if self.backend not in BACKENDS:
            problems.append(f"unknown backend {self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if not self.datasets:
            problems.append("no datasets given (--dataset gsm8k math500 aime24, or file paths)")
        if self.samples < 1:
            problems.append(f"--samples must be >= 1, got {self.samples}")
        if self.limit is not None and self.limit < 1:
            problems.append(f"--limit must be >= 1, got {self.limit}")
        if self.max_new_tokens < 1:
            problems.append(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature is not None and self.temperature < 0:
            problems.append(f"--temperature must be >= 0, got {self.temperature}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            problems.append(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.protocol is not None and self.protocol not in PROTOCOLS:
            problems.append(f"unknown --protocol {self.protocol!r}: choose {', '.join(PROTOCOLS)}")
        for key, value in PROTOCOLS.get(self.protocol or "", {}).items():
            given = getattr(self, key)
            if given is not None and given != value:
                flag = "--" + key.replace("_", "-")
                problems.append(
                    f"--protocol {self.protocol} sets {flag} {value:g}; drop {flag} {given:g} or --protocol"
                )
        if self.batch_size < 1 or (self.chunk_size is not None and self.chunk_size < 1):
            problems.append("--batch-size and --chunk-size must be >= 1")
        if self.countdown_difficulty != COUNTDOWN_DIFFICULTY:
            from data.countdown import DIFFICULTIES

            if self.countdown_difficulty not in DIFFICULTIES:
                problems.append(
                    f"--difficulty must be one of {', '.join(map(str, DIFFICULTIES))}, got {self.countdown_difficulty}"
                )
            elif "countdown" not in [d.lower() for d in self.datasets]:
                problems.append("--difficulty applies to --dataset countdown only")
        if self.max_rounds < 0:
            problems.append(f"--max-rounds must be >= 0, got {self.max_rounds}")
        if (problem := check_selection(self.method, self.select)) is not None:
            problems.append(problem)
        elif not self.selection().scores(self.method):
            for flag, value in (("--max-score-tokens", self.max_score_tokens), ("--score-prompt", self.score_prompt)):
                if value is not None:
                    problems.append(
                        f"{flag} applies to --select best (self-refine) and --select score (best-of-n) only"
                    )
        if self.max_score_tokens is not None and self.max_score_tokens < 1:
            problems.append(f"--max-score-tokens must be >= 1, got {self.max_score_tokens}")
        if self.max_reflection_tokens < 1:
            problems.append(f"--max-reflection-tokens must be >= 1, got {self.max_reflection_tokens}")
        if self.judge.kind not in JUDGE_KINDS:
            problems.append(f"unknown judge {self.judge.kind!r}: choose one of {', '.join(JUDGE_KINDS)}")
        elif self.judge.kind in LLM_JUDGES and not (self.judge.base_url and self.judge.model):
            problems.append(f"--judge {self.judge.kind} needs --judge-base-url and --judge-model")
        if not self.judge.timeout_s > 0:
            problems.append(f"--judge-timeout must be > 0 seconds, got {self.judge.timeout_s}")
        if problems:
            raise EvalError("; ".join(problems))

    def settings(
        self, prompts: MethodPrompts, model: dict[str, Any] | None = None, runtime: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """What decides how a sample is produced and scored: the resume fingerprint. ``model`` is
        the checkpoint's identity (:meth:`eval.identity.ModelIdentity.fingerprint`: its step and
        content, not the spec; the spec's name where there is none), ``runtime`` what the
        backend decided for the settings left to ``auto`` (dtype, threads, device: greedy
        answers differed on 19 of 40 questions between fp32 and bf16)."""
        gp = self.gen_params()
        s: dict[str, Any] = {
            "model": model if model is not None else {"name": self.model},
            "method": self.method,
            "backend": self.backend,
            "max_new_tokens": gp.max_new_tokens,
            "temperature": gp.temperature,
            "top_p": gp.top_p,
            "seed": self.seed,
            "prompts": prompts.version(self.method, self.selection().resolved(self.method)),
            "fallback_last_number": self.fallback_last_number,
            "judge": {"kind": self.judge.kind, "model": self.judge.model if self.judge.kind in LLM_JUDGES else None},
        }
        if self.judge.kind in LLM_JUDGES:
            from prompts import load_prompt, prompt_version

            s["judge"]["prompt"] = prompt_version(load_prompt(self.judge_prompt))
        if self.method == "self-refine":
            s["max_rounds"] = self.max_rounds
        if self.method == REFLECT_RETRY:
            s["max_reflection_tokens"] = self.max_reflection_tokens
        select = self.selection().resolved(self.method)
        if self.method == BEST_OF_N:  # N decides how each sample is made, so it is no run extension
            s["select"], s["candidates"] = select, self.samples
        elif select is not None and select != SELECTS[self.method][0]:  # only then: earlier runs stay valid
            s["select"] = select
        if self.selection().scores(self.method):
            s["max_score_tokens"] = self.max_score_tokens or gp.max_new_tokens
        if self.prefill:  # only then: earlier runs' fingerprints stay valid
            s["prefill"] = self.prefill
        if self.countdown_difficulty != COUNTDOWN_DIFFICULTY:  # only then: earlier runs' fingerprints stay valid
            s["countdown_difficulty"] = self.countdown_difficulty
        s["runtime"] = runtime if runtime is not None else self.requested_runtime()
        return s

    def requested_runtime(self) -> dict[str, Any]:
        """The runtime settings as asked (``auto`` where not given), for a backend that decides
        nothing itself: vllm's ``auto`` dtype is the model config's, part of the model's identity."""
        if self.backend == "vllm":
            return {
                "dtype": self.dtype or AUTO,
                "tensor_parallel_size": self.tensor_parallel_size,
                "max_model_len": self.max_model_len,
            }
        return {"device": self.device, "dtype": self.dtype or AUTO, "threads": self.threads or AUTO}
