"""The agent: answers free questions about a workspace with graph tools, step by step.

- ``model``: chat completions on any OpenAI-compatible endpoint (fallbacks, rate limits);
- ``tools``: the graph tools, read-only Cypher and consented, redacted file reads;
- ``loop``: the JSON-action loop with its limits; ``planner``: answers without a model;
- ``redact``: secret redaction; ``answer``: the Markdown; ``history``: SQLite history and audit;
- ``service``: ``Asker``, the entry point used by ``orbit/ask`` and ``orbit-lsp ask``.

Nothing here knows about LSP.
"""
