"""Record and replay of every model call of a scenario (vcrpy), one cassette per scenario and assistant.

vcrpy is imported without the HTTP libraries the testkit never records through (:mod:`.vcr_imports`)."""

from .vcr_imports import install_finder

install_finder()
