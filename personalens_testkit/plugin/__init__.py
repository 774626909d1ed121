"""The pytest plugin (registered through the ``pytest11`` entry point, or ``-p personalens_testkit.plugin``):
glue only - the run is :class:`~personalens_testkit.run.state.Run`, its verdicts are decided in
:mod:`personalens_testkit.gating`.

A test takes part when it is marked ``@pytest.mark.personalens(task_kind="sd"|"md")`` and asks for the
``scenario`` argument; the plugin is inert for every other test.

Each module is a plugin of its own and says what it hooks:

- :mod:`.configure` - options, settings, the checks before any case, xdist's shared servers, the header
- :mod:`.cases` - parametrization, order, expectations, evaluating ahead, no start after a stop
- :mod:`.fixtures` - ``personalens_run``, ``score_floors``, ``judged_dialogue``, ``check_floors`` (and which item is running, for them)
- :mod:`.rows` - a case's row, built where it ran and carried on its report
- :mod:`.controller` - the controlling process: rows written, early stops, the end of the run (registered there)
- :mod:`.progress` - a live run's progress display (registered in every process)
- :mod:`.reports` - what pytest keeps of a passed case's report (registered in the controlling process)
- :mod:`.xdist_queue` - each xdist worker's queue: kept deep by the controller, read by the worker
- :mod:`.project` - where the project is, whether a run collects suites (no hook)
"""

#: in the order they import each other (a module before any that imports it): pytest marks each for assertion
#: rewriting when it reaches it, and warns for one already imported
pytest_plugins = [f"{__name__}.{name}" for name in ("cases", "rows", "fixtures", "configure")]
