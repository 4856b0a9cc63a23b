"""The query helper: a per-user background process that answers ``orbit-lsp`` queries fast.

A query from the command line spends most of its time starting Python and importing the
libraries it needs (pydantic, redis-py, falkordb, orbit's graph and CLI modules); the answer
itself takes a few milliseconds. The helper imports all of that once and then serves queries:

- ``orbit_lsp.launch`` is the console script. It imports only the standard library (this
  package's ``__init__`` and ``protocol`` too), and for a read-only query (``callers``,
  ``impact``, ``implementations``, ``chain``, ``cypher``) sends the arguments, the current
  directory, the environment and the umask over a Unix socket to the helper, then writes the
  helper's stdout/stderr and exits with its exit status.
- ``server`` is the helper: started on demand, detached (its own session), by the first query
  that finds none (that query runs in-process as before); it listens on a 0600 socket in a 0700
  per-user directory (``protocol.helper_dir``), accepts connections only from its own user
  (``SO_PEERCRED``), forks a child per query (the child runs ``orbit_lsp.cli`` exactly as the
  in-process path does, with its output captured) and exits after ``ORBIT_HELPER_IDLE_S``
  seconds without a query (default 600) or when orbit's code on disk changed.

Everything the helper cannot or should not do falls back to the in-process path, transparently
and with the same output: commands other than the queries above, arguments that do not parse,
``--help``, a workspace with no graph yet (it is indexed in-process), a helper of other code
(``protocol.code_stamp``), a socket or directory owned by someone else or too open, a helper
that dies mid-query, one that does not take the query within 2 seconds. ``ORBIT_NO_HELPER=1`` turns the
helper off (every query runs in-process and none is started).
"""
