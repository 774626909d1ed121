"""The run's settings: one table of options (:mod:`.table`), the project's config (:mod:`.project`),
and their resolution in one precedence order (:mod:`.resolve`) into :class:`RunSettings`."""

from .model import RunSettings
from .project import ProjectConfig, ProjectSources, load_project_config
from .resolve import check_selection, parse_shard, resolve_settings
from .table import OPTION_NAMES, SETTINGS, Setting

__all__ = ["OPTION_NAMES", "ProjectConfig", "ProjectSources", "RunSettings", "SETTINGS", "Setting", "check_selection",
           "load_project_config", "parse_shard", "resolve_settings"]
