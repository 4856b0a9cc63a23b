"""Edits orbit proposes: the proposal store (``proposals``) and graph-derived removals
(``removal``). Nothing here knows LSP; ``orbit_lsp.server.code_actions`` translates."""
