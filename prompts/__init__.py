"""Every prompt text of the recipe lives in ``prompts/templates``; this package loads them.

Nothing else in the repository holds prompt text, so changing how the model is asked to
refine (or how the judge is asked to grade) is a one-file change that both engines and the
evaluation pick up.
"""

from prompts.loader import (
    BUILTIN_PROMPTS,
    PromptSet,
    build_chat,
    load_prompt,
    prompt_version,
)

__all__ = ["BUILTIN_PROMPTS", "PromptSet", "build_chat", "load_prompt", "prompt_version"]
