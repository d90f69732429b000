"""A YAML config file's size once its aliases are expanded, bounded before anything builds it.

YAML's anchors and aliases (``&a`` / ``*a``) let a few lines stand for a value repeated many
times: nine lines of nine aliases each stand for 9**9 values (the "billion laughs"). PyYAML
builds them as shared references, but OmegaConf copies every one into a node of its own, so
``OmegaConf.load`` of such a file grows without bound (memory and time) and never answers.
:func:`alias_expansion_problem` counts the values a file stands for on the node graph PyYAML
composes (which expands nothing), each node once, and refuses a file over
:data:`MAX_EXPANDED_VALUES` or one whose alias refers to itself.
"""

from __future__ import annotations

from pathlib import Path

MAX_EXPANDED_VALUES = 100_000  # a whole pasr train config is a few hundred


def expanded_size(text: str) -> int | None:
    """The number of values (scalars, lists, mappings) ``text`` stands for with every alias
    expanded, or None when an alias refers to a value that contains it (no end)."""
    import yaml

    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(node) -> int | None:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in busy:
            return None
        busy.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = []
        for child in children:
            inner = size(child)
            if inner is None:
                return None
            total += inner
        busy.discard(key)
        sizes[key] = total
        return total

    total = 0
    for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if document is None:
            continue
        inner = size(document)
        if inner is None:
            return None
        total += inner
    return total


def alias_expansion_problem(path: str | Path, text: str | None = None) -> str | None:
    """Why the YAML file ``path`` (its ``text`` if already read) must not be loaded, or None;
    a file that does not read or parse is left to the loader's own error."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8") if text is None else text
        size = expanded_size(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None
    if size is None:
        return f"config file {path}: a YAML alias refers to a value that contains it (it never ends); write it out"
    if size > MAX_EXPANDED_VALUES:
        return (
            f"config file {path}: its YAML aliases (*name) expand to {size:,} values, more than "
            f"{MAX_EXPANDED_VALUES:,}; a config needs a few hundred: write the values out"
        )
    return None
