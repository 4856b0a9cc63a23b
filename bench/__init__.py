"""Benchmarks of orbit-lsp on real corpora; see ``bench/run.py`` (``python -m bench.run --help``)."""
