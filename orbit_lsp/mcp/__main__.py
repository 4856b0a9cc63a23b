"""``python -m orbit_lsp.mcp``: the same as ``orbit-lsp mcp``."""

import sys

from orbit_lsp.mcp.server import main

sys.exit(main())
