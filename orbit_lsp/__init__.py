"""orbit-lsp: a language server whose working context is a code graph in FalkorDB."""

__version__ = "0.1.0"
