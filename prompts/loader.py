"""Load prompt templates by built-in name or by file path, and build chat messages.

A run points at its own template with a path (``pasr.prompts.refine=/my/prompt.txt``); a bare
name (``refine_system``) means the file shipped in ``prompts/templates``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"

BUILTIN_PROMPTS = tuple(sorted(p.stem for p in TEMPLATE_DIR.glob("*.txt")))


class PromptFileError(FileNotFoundError):
    """A prompt path that names no usable text file: missing, a folder, unreadable, or not
    UTF-8 text. A FileNotFoundError, so that every caller catching a missing template catches
    each of these too; the message is one line naming the file."""


@lru_cache(maxsize=64)
def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").strip("\n")
    except UnicodeDecodeError as exc:
        raise PromptFileError(
            f"prompt template file {path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}); save it as UTF-8"
        ) from None
    except OSError as exc:
        raise PromptFileError(f"cannot read prompt template file {path}: {exc.strerror or exc}") from None


def resolve_prompt_path(name_or_path: str) -> Path:
    """A built-in template name, or a path to a text file. Raises a clear error otherwise
    (KeyError for an unknown name, :class:`PromptFileError` for a path)."""
    candidate = Path(name_or_path).expanduser()
    if candidate.suffix == ".txt" or candidate.is_file() or "/" in name_or_path:
        if not candidate.is_file():
            raise PromptFileError(f"prompt template file not found: {name_or_path}")
        return candidate.resolve()
    builtin = TEMPLATE_DIR / f"{name_or_path}.txt"
    if not builtin.is_file():
        raise KeyError(f"unknown prompt {name_or_path!r}: give a file path or one of {', '.join(BUILTIN_PROMPTS)}")
    return builtin


def load_prompt(name_or_path: str) -> str:
    """Return the template text (trailing newlines stripped)."""
    return _read(str(resolve_prompt_path(name_or_path)))


def prompt_problem(name_or_path: str) -> str | None:
    """Why ``name_or_path`` cannot be loaded (one line), or None: what a config check reports
    before a run starts, instead of the error the run would stop with once it reads the template."""
    try:
        load_prompt(name_or_path)
    except (KeyError, FileNotFoundError) as exc:
        return str(exc.args[0]) if exc.args else type(exc).__name__
    return None


def prompt_version(text: str) -> str:
    """A short content hash: judge caches and rollout dumps key on it, so editing a template
    never serves stale cached scores."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def build_chat(system: str | None, user: str) -> list[dict[str, str]]:
    """Chat messages in the OpenAI / HF chat-template shape."""
    messages = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": user})
    return messages


# The paper's prompts, the defaults of ``pasr.prompts.*`` in every engine and ``pasr eval``
# (recipe.pasr_config.PromptsConfig takes them from here: prompts/ is the floor below recipe/)
DEFAULT_REFINE, DEFAULT_PLAIN, DEFAULT_JUDGE = "refine_system", "plain_system", "judge_continuous"


@dataclass(frozen=True)
class PromptSet:
    """The resolved texts one run uses (both engines and eval take one of these)."""

    refine: str
    plain: str
    judge: str

    @classmethod
    def load(cls, refine: str | None = None, plain: str | None = None, judge: str | None = None):
        """The templates named (a name or a path); one left out is ``pasr.prompts``'s default."""
        return cls(
            refine=load_prompt(refine or DEFAULT_REFINE),
            plain=load_prompt(plain or DEFAULT_PLAIN),
            judge=load_prompt(judge or DEFAULT_JUDGE),
        )

    def refine_chat(self, question: str) -> list[dict[str, str]]:
        return build_chat(self.refine, question)

    def plain_chat(self, question: str) -> list[dict[str, str]]:
        return build_chat(self.plain, question)
