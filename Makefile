# The two commands of the README. Both create .venv with pip when it is missing.
PY      := .venv/bin/python
STAMP   := .venv/.installed

.PHONY: demo test clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/quickstart.py

test: $(STAMP)
	$(PY) -m pytest

clean:
	rm -rf .venv build *.egg-info
