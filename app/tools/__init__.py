"""Tooling, apart from the serving path: fetching the test assets, converting tokenizer files to
``tokenizer.json``, and the demo's local llama.cpp upstream.  The proxy (``app.main``,
``app.serve``) never imports this package; ``toksplice assets`` and ``toksplice demo`` do.
"""
