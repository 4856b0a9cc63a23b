"""``orbit-lsp mcp``: the code graph served to coding agents over the Model Context Protocol.

- ``live``: the workspace graph kept current (first index, file watcher, offline recovery);
- ``tools``: the tools, their schemas, and how a call becomes graph queries;
- ``server``: the SDK server (stdio, streamable HTTP); ``options``: the command's options and the
  tool names (no SDK import: every ``orbit-lsp`` invocation builds that parser).

The graph, index, agent and memory layers know nothing of this package: it only translates.
"""
