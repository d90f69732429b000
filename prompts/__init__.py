"""Every prompt text of the recipe lives in ``prompts/templates``; this package loads them.

Nothing else in the repository holds prompt text, so changing how the model is asked to
refine (or how the judge is asked to grade) is a one-file change that both engines and the
evaluation pick up.
"""

from prompts.loader import (
    BUILTIN_PROMPTS,
    DEFAULT_JUDGE,
    DEFAULT_PLAIN,
    DEFAULT_REFINE,
    PromptSet,
    build_chat,
    load_prompt,
    prompt_version,
)

# The assistant prefill of PASR's rollouts (``pasr.prefill_think``): the format's opening tag,
# appended to the prompt after the chat template's generation prompt, so the model continues a
# think block it did not write (its tokens are prompt, never trained or counted); the response
# text the reward reads starts with it (runtime.decoding.decode_response's ``prefill``).
THINK_PREFILL = "<think>"

__all__ = [
    "BUILTIN_PROMPTS",
    "DEFAULT_JUDGE",
    "DEFAULT_PLAIN",
    "DEFAULT_REFINE",
    "THINK_PREFILL",
    "PromptSet",
    "build_chat",
    "load_prompt",
    "prompt_version",
]
