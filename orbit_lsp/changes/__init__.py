"""Change impact: from a diff (git, a patch, unsaved buffers) to the symbols it changes, their
blast radius in the code graph and the tests that reach them. Knows nothing of its callers (CLI,
language server, agent): ``analyse`` returns plain data with the Cypher it ran."""
