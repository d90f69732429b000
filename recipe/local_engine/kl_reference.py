"""The KL reference of the local engine's RL phase: the policy the phase started from, frozen.

Only each step's reference log-probs read it (a forward pass over the step's trained rows, a few
seconds of a step of about a minute on 2 CPU cores), yet held in memory it is one more copy of
the weights beside the policy, its gradients and AdamW's two moments for the whole phase: 0.54 GB
of SmolLM2-135M in fp32. With ``algo.ref_in_memory=false`` (the
default) it is read from the checkpoint the phase started from (the warm-up's pinned end, or the
base model without a warm-up) for those log-probs and dropped right after, so the generation and
the update, where a step's memory peaks, run without it. That checkpoint holds the weights in the
policy's dtype, so both ways give the same reference log-probs (verl's counterpart is
``ref.fsdp_config.param_offload``, which parks the reference in host memory rather than
dropping it).

Read again and again, that checkpoint could change under the run: replaced mid-run, the KL term
silently pulled toward another model (KL 1.09 -> 8.66 in one such run, exit 0). So the weights
the phase starts from are fingerprinted (:func:`weights_digest`, recorded in every checkpoint's
``trainer_state.json`` from then on, so a resumed run checks against the original), and each
read is checked against it: other weights, a checkpoint gone or cut short stop the run with one
line that names it and says how to go on (:class:`ReferenceUnavailable`). A read is the file
loaded into memory of its own and hashed there (about 0.3 s and 0.4 s on SmolLM2-135M in fp32,
of a step of about a minute), so what is checked is what the step uses.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

DIGEST_KEY = "kl_reference"  # the phase start's fingerprint in a checkpoint's trainer_state.json (PhaseStart.saved)


class ReferenceUnavailable(RuntimeError):
    """The KL reference cannot be read as the RL phase started from it (gone, cut short, other
    weights); the message is one line naming it and how to go on."""


def weights_digest(model) -> str:
    """sha256 of ``model``'s state dict: every tensor's name, dtype, shape and bytes, by name. The
    same weights give the same digest however they were saved or loaded, in the same dtype."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}\n".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


@dataclass
class PhaseStart:
    """Where the RL phase's reference is read from and what its weights were when the phase
    started: their :func:`weights_digest` in the dtype they were trained in (None until known; a
    checkpoint from before digests were kept has none, and the first read records it)."""

    path: str  # the folder: the warm-up's pinned end, or model.path's without a warm-up
    what: str  # what it is, for the message
    resume: str  # the command that resumes the run
    local: bool = True  # a local folder (False: a hub name, read from transformers' cache)
    digest: str | None = None
    dtype: str | None = None  # the digest's dtype (model.dtype when the phase started)

    def record(self, model, dtype: str) -> None:
        """The phase starts from ``model``'s weights, in ``dtype``."""
        self.digest, self.dtype = weights_digest(model), dtype

    def saved(self) -> dict | None:
        """What a checkpoint keeps of it (under :data:`DIGEST_KEY`), None before it is known."""
        return None if self.digest is None else {"sha256": self.digest, "dtype": self.dtype}

    def restore(self, saved: dict | None) -> None:
        """Take back what a checkpoint kept (:meth:`saved`)."""
        self.digest, self.dtype = (saved["sha256"], saved["dtype"]) if saved else (None, None)

    @classmethod
    def of(cls, cfg, ckpt_root: Path, model_path: str, run_dir: Path) -> PhaseStart:
        """Where the RL phase of a run with config ``cfg`` starts: the warm-up's pinned end in
        ``ckpt_root``, or the base model (``model_path``, resolved) without a warm-up."""
        from recipe.step_files import step_name

        resume = f"pasr train --resume {run_dir}"
        if cfg.warmup.steps:
            path = (ckpt_root / step_name(cfg.warmup.steps)).absolute()
            return cls(str(path), "the warm-up's pinned end", resume)
        local = Path(model_path).is_dir()  # else a hub name, read from transformers' cache
        path = str(Path(model_path).absolute()) if local else model_path
        return cls(path, f"model.path={cfg.model.path}", resume, local=local)

    def read(self, load: Callable[[str, str], object], dtype: str):
        """``load(path, dtype)`` checked against :attr:`digest` (recorded when None), in
        ``dtype``; :class:`ReferenceUnavailable` where it is gone, cannot load or holds other
        weights. It is read in the digest's dtype and then cast, so a run resumed with another
        ``model.dtype`` (``--force``) still checks it."""
        import torch

        from runtime.model_loading import ModelLoadError

        if self.local and not Path(self.path).is_dir():
            raise self._unavailable("is gone")
        try:
            model = load(self.path, self.dtype or dtype)
        except ModelLoadError as exc:
            why = str(exc).removeprefix(f"cannot load model {self.path!r}: ")
            raise self._unavailable(f"cannot be loaded ({why})") from None
        digest = weights_digest(model)
        if self.digest is not None and digest != self.digest:
            raise self._unavailable(
                f"holds other weights than the phase started from (sha256 {digest[:12]}, not {self.digest[:12]}): "
                "the KL term would pull toward another model"
            )
        if self.digest is None:
            self.digest, self.dtype = digest, dtype
        return model if self.dtype == dtype else model.to(getattr(torch, dtype))

    def _unavailable(self, why: str) -> ReferenceUnavailable:
        return ReferenceUnavailable(
            f"the KL reference {self.path} ({self.what}, where the RL phase started) {why}; restore it and "
            f"resume with: {self.resume}, or go on without the KL term: {self.resume} algo.kl_coef=0 --force"
        )


class KLReference:
    """A frozen reference model, held (``keep``) or loaded by ``load`` for each :meth:`apply`."""

    def __init__(self, load: Callable[[], object], keep: bool):
        self._load = load
        self._held = load() if keep else None

    @classmethod
    def held(cls, model) -> KLReference:
        """A reference that is this model, kept in memory."""
        return cls(lambda: model, keep=True)

    def apply(self, fn: Callable[[object], T]) -> T:
        """``fn(reference model)``: with the held model, or one loaded now, which is dropped (its
        memory returned) when ``fn`` returns."""
        return fn(self._held if self._held is not None else self._load())
