# The two commands of the README. Both create .venv with pip when it is missing.
PY      := .venv/bin/python
STAMP   := .venv/.installed
TORCH_CPU ?= 2.13.0
# where `make demo` keeps the kernels it compiles, so a second run skips the compilers (verify alone
# would use a temporary cache and remove it)
DEMO_CACHE ?= .venv/intent-trace-cache

.PHONY: demo test clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	# tilelang needs torch; the CPU build of 2.13.0 is this machine's local wheel (a plain
	# "torch" would resolve to a multi-GB CUDA build). An installed torch is kept.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "torch==$(TORCH_CPU)"
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/quickstart.py
	.venv/bin/intent-trace verify c-tilelang --cache-dir $(DEMO_CACHE)

test: $(STAMP)
	$(PY) -m pytest

clean:
	rm -rf .venv build *.egg-info
