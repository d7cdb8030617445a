.PHONY: all test lint bench clean

PY ?= python3
SRC := $(wildcard «w1»/*.py)

all: lint test

test:
    $(PY) -m pytest -q $(PYTEST_ARGS)

lint: $(SRC)
    ruff check . && mypy «w1»

bench:
    $(PY) -m loadtest.run --calls=«x1» --seed=$${SEED:-0}

