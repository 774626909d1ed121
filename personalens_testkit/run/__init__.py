"""One run of the suites, in parts that each do one job and are testable without pytest:

- :mod:`.cases`: which cases run - the selection, ``--repeat``, ``--shard``, ``--resume``;
- :mod:`.recording`: what replays, what records, and what a replay must reproduce;
- :mod:`.models`: the model pool - embedded servers, clients, limits, the preflight calls;
- :mod:`.assistant`: the assistant under test, its entry resolved once;
- :mod:`.cases_runner`: evaluating a case; :mod:`.concurrency`: ``--concurrency`` cases ahead in threads, and
  :mod:`.lanes`: how many (the number given, or the one ``--concurrency auto`` picks);
- :mod:`.stop`: stopping early (a full disk, a dead endpoint), keeping every row;
- :mod:`.finish`: the end of the run - its report, files and recorded rows;
- :mod:`.state`: :class:`~.state.Run`, which holds the parts; the pytest plugin holds a Run.
"""
