"""No import circle between the project's modules: every ``import`` and ``from ... import`` of a
project module, also the ones inside functions (a lazy import still ties two modules together),
walked with ``ast`` without importing anything. ``runtime.model_loading`` and
``runtime.hf_export`` used to import each other (for the cache folder)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The floors of the house, bottom to top: a package imports only packages on a lower floor (and
# itself). The prompt templates; the reward functions and judges; datasets, records and the CLI
# error type; the model runtime (loading, generation, attention, dtype, checkpoint export) that
# both engines and eval/ run models with; the engines and the PASR step core; the evaluation and
# refine statistics (which reuse the step core and configs); the ``pasr`` command line; the
# benchmarks, which may drive anything, the CLI included.
FLOORS = ("prompts", "rewards", "data", "runtime", "recipe", "eval", "pasr_cli", "benchmarks")
PACKAGES = FLOORS


def project_modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = path
    return mods


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                deps.update(filter(None, (resolve(a.name) for a in node.names)))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.update(
                    filter(None, (resolve(f"{node.module}.{a.name}") or resolve(node.module) for a in node.names))
                )
        deps.discard(name)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_project_modules():
    graph = import_graph(project_modules())
    assert len(graph) > 100  # the walk found the project
    assert "runtime.hf_export" in graph["runtime.model_loading"]  # lazy imports are seen
    assert cycles(graph) == []


def package_of(module: str) -> str:
    """The floor a module lives on: its top-level package, except that a ``__main__`` module (an
    entry point that nothing imports, e.g. ``python -m recipe``) counts as the command line."""
    return "pasr_cli" if module.endswith(".__main__") else module.split(".")[0]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    floor = {pkg: i for i, pkg in enumerate(FLOORS)}
    return sorted(
        f"{mod} -> {dep}"
        for mod, deps in graph.items()
        for dep in deps
        if floor[package_of(dep)] > floor[package_of(mod)]
    )


def test_upward_import_finder_finds_one():
    graph = {"runtime.x": {"recipe.y", "rewards.z"}, "recipe.y": {"runtime.x"}, "recipe.__main__": {"pasr_cli"}}
    assert upward_imports(graph) == ["runtime.x -> recipe.y"]


def test_every_package_imports_only_floors_below_it():
    """Lazy imports inside functions count too: importing an engine from the runtime on demand
    still makes the runtime depend on the engine."""
    mods = project_modules()
    assert {name.split(".")[0] for name in mods} == set(FLOORS)
    assert upward_imports(import_graph(mods)) == []


def test_every_module_compiles_without_a_syntax_warning():
    """Python 3.12 prints a SyntaxWarning for an invalid escape such as ``"\\;"`` in a docstring at
    every import of a module without cached bytecode: on a GPU machine it came out of every
    process that imported the rule judge. This interpreter may be older, so warnings are errors."""
    import warnings

    for _name, path in project_modules().items():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            compile(path.read_text(), str(path), "exec")  # raises SyntaxError / SyntaxWarning / DeprecationWarning
