"""A null config key interpolated into text: OmegaConf writes it as ``None``.

``trainer.default_local_dir=null`` made ``pasr_verl.rollout_dir`` (``${trainer.default_local_dir}/rollouts``)
the relative folder ``None/rollouts``: ``pasr check`` called it writable and a run would have
dumped its rollouts there. A value that *is* one interpolation (``${x}``) stays null itself and is
left alone; only a null inside text is named.
"""

from __future__ import annotations

import re

from omegaconf import OmegaConf

_INTERPOLATION = re.compile(r"\$\{([^}:$]+)\}")  # ${a.b}; not resolvers (${oc.env:X}) or nesting


def null_interpolations(config, key: str) -> list[str]:
    """One line for each value of section ``key`` of ``config`` that interpolates a null key into
    text, naming both and what to set."""
    node = config.get(key)
    if node is None or not OmegaConf.is_config(node):
        return []
    raw = OmegaConf.to_container(node, resolve=False)
    problems = []
    for name, value in raw.items() if isinstance(raw, dict) else ():
        refs = _INTERPOLATION.findall(value) if isinstance(value, str) else []
        if not refs or value.strip() == f"${{{refs[0]}}}":
            continue  # no interpolation, or the whole value: null itself, not the text "None"
        for ref in refs:
            if OmegaConf.select(config, ref.strip(), default="") is None:
                text = value.replace("${" + ref + "}", "None")
                problems.append(
                    f"{key}.{name}={value}: {ref.strip()} is null, so this would be the text {text!r}; "
                    f"set {ref.strip()} (or {key}.{name} itself)"
                )
    return problems
