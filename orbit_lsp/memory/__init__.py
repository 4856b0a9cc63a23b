"""The user's memories, in the ``orbit_memory`` graph, with provenance of which answer used which.

- ``concepts``: normalised, stop-word-free, stemmed concepts of a text (Snowball);
- ``store``: ``MemoryStore`` — remember, confirm, forget, list (with uses and stale flags),
  recall (scored by concepts matched plus a boost for the active project), and the
  ``(:Turn)-[:RECALLED]->(:Memory)`` links;
- ``anchors``: memories anchored to a file or symbol of a workspace, possibly stale once that
  file's graph changed;
- ``intent``: "remember that …" inside a question (a memory the agent proposes, unconfirmed).

Nothing here knows about LSP.
"""
