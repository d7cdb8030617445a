name: CI

on:
  push:
    branches: [main, "release/**"]
  pull_request:

env:
  PYTHONUNBUFFERED: "1"
  CACHE_KEY: «kb1»-«h1»

jobs:
  test:
    runs-on: ${{ matrix.os }}
    strategy:
      fail-fast: false
      matrix:
        os: [ubuntu-latest, macos-14]
        python: ["3.11", "3.12"]
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python }}
      - run: |
          pip install -e ".[dev]"
          pytest -q -x --maxfail=«x1»

