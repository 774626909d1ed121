"""Read benchmark data in the upstream layout.

    <root>/data/profile/user<N>/profile.json      demographics, preferences, interests, interactions
    <root>/data/profile/user<N>/tasks.json        single-domain tasks with the user's situations
    <root>/data/profile/user<N>/tasks_md.json     multi-domain tasks with the user's situations
    <root>/data/task/<Domain>/task.jsonl          the task catalogue (111 tasks)

``<root>`` may be an upstream checkout or its ``data/`` folder. The 50-profile sample is
bundled with this package; :func:`open_dataset` with no path returns it. Profiles are read
lazily (a case needs one; collection needs only the task lists), and task texts shared by
many users are held once.
"""

from __future__ import annotations

import hashlib
import os
import re
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..errors import DataError, dotted
from ..files import json_lines
from .models import Profile, Scenario, Situation, Task, UserTask

_USER_DIR = re.compile(r"^user(\d+)$")
#: the files of a profile folder (what a data fingerprint counts)
_PROFILE_FILES = ("profile.json", "tasks.json", "tasks_md.json")
_USER_TASKS = TypeAdapter(dict[str, UserTask])
_CATALOGUE_LINE = TypeAdapter(dict[str, Any])


def bundled_root() -> Path:
    """The folder of the bundled 50-profile sample (upstream layout, with NOTICE and licence)."""
    return Path(str(resources.files("personalens_testkit.data") / "sample50"))


def open_dataset(path: str | Path | None = None) -> Dataset:
    """Open an upstream-layout dataset; ``None`` opens the bundled 50-profile sample."""
    if path is None:
        return Dataset(bundled_root() / "data", bundled=True)
    root = Path(path).expanduser()
    if not root.exists():
        raise DataError(root, None, "no such folder (expected an upstream PersonaLens checkout or its data/ folder)")
    data = root / "data" if (root / "data" / "profile").is_dir() else root
    if not (data / "profile").is_dir():
        raise DataError(root, None, "not an upstream PersonaLens layout: no data/profile/ folder inside")
    return Dataset(data, bundled=False)


def describe_validation_error(exc: ValidationError) -> tuple[str, str]:
    """The first problem of a pydantic error as (dotted field path, message)."""
    first = exc.errors()[0]
    field = dotted(first["loc"]) or "(document)"
    message = first["msg"]
    if first["type"] == "json_invalid":
        return "(document)", f"not valid JSON: {first.get('ctx', {}).get('error', message)}"
    return field, message


class Dataset:
    """One benchmark dataset on disk. Cheap to create; reads files on demand."""

    def __init__(self, data_dir: Path, *, bundled: bool) -> None:
        self.data_dir = data_dir
        self.bundled = bundled
        self._interned: dict[tuple[Any, ...], Task] = {}
        self._situations: dict[tuple[str, ...], Situation] = {}
        self.profile = lru_cache(maxsize=64)(self._read_profile)

    def __repr__(self) -> str:
        return f"Dataset({str(self.data_dir)!r}, bundled={self.bundled})"

    @property
    def label(self) -> str:
        return "bundled 50-profile sample" if self.bundled else str(self.data_dir)

    @cached_property
    def identity(self) -> str:
        """Which data this is, the same on every machine: the bundled sample or upstream data, and a fingerprint
        of the content of the task catalogue and of every profile's files (an edit of the same size is another
        fingerprint; made once a process)."""
        digest = hashlib.sha256()
        try:
            for path in sorted((self.data_dir / "task").glob("*/task.jsonl")):
                content = path.read_bytes()
                digest.update(f"{path.parent.name}\0{len(content)}\0".encode() + content)
            for user in sorted(os.scandir(self.data_dir / "profile"), key=lambda entry: entry.name):
                if _USER_DIR.match(user.name) and user.is_dir():
                    for name in _PROFILE_FILES:
                        path = Path(user.path) / name
                        content = path.read_bytes() if path.is_file() else b""
                        digest.update(f"{user.name}/{name}\0{len(content) if path.is_file() else -1}\0".encode() + content)
        except OSError as exc:
            raise DataError(self.data_dir, None, f"cannot be read ({exc.strerror or exc})") from None
        return f"{'bundled 50-profile sample' if self.bundled else 'upstream data'} #{digest.hexdigest()[:12]}"

    def user_numbers(self) -> list[int]:
        """Numbers of all profiles present, ascending."""
        numbers = []
        for entry in (self.data_dir / "profile").iterdir():
            match = _USER_DIR.match(entry.name)
            if match and entry.is_dir():
                numbers.append(int(match.group(1)))
        return sorted(numbers)

    def has_user(self, number: int) -> bool:
        return (self.data_dir / "profile" / f"user{number}").is_dir()

    def user_tasks(self, number: int) -> list[UserTask]:
        """The user's single-domain then multi-domain tasks, in file order."""
        tasks: list[UserTask] = []
        for name in ("tasks.json", "tasks_md.json"):
            path = self.data_dir / "profile" / f"user{number}" / name
            tasks.extend(self._read_user_tasks(path))
        return tasks

    def scenarios_for(self, number: int) -> list[Scenario]:
        user_id = f"user{number}"
        return [
            Scenario(user_id=user_id, task=self._intern(task), situation=self._situation(task.situation))
            for task in self.user_tasks(number)
        ]

    def catalogue(self) -> dict[str, Task]:
        """The task catalogue from data/task/<Domain>/task.jsonl, keyed by task id."""
        tasks: dict[str, Task] = {}
        task_dir = self.data_dir / "task"
        if not task_dir.is_dir():
            raise DataError(task_dir, None, "no such folder (expected data/task/<Domain>/task.jsonl)")
        for folder in sorted(p for p in task_dir.iterdir() if p.is_dir()):
            path = folder / "task.jsonl"
            for line_no, line in enumerate(json_lines(_read_text(path)), start=1):
                if not line.strip():
                    continue
                task = _catalogue_task(path, line_no, line, folder.name)
                tasks[task.task_id] = task
        return tasks

    def _read_profile(self, user_id: str) -> Profile:
        path = self.data_dir / "profile" / user_id / "profile.json"
        try:
            profile = Profile.model_validate_json(_read_bytes(path))
        except ValidationError as exc:
            field, message = describe_validation_error(exc)
            raise DataError(path, field, message) from None
        if profile.demographics.get("user_id") != user_id:
            raise DataError(path, "demographics.user_id", f"expected {user_id!r}, found {profile.demographics.get('user_id')!r}")
        return profile

    def _read_user_tasks(self, path: Path) -> list[UserTask]:
        try:
            parsed = _USER_TASKS.validate_json(_read_bytes(path))
        except ValidationError as exc:
            field, message = describe_validation_error(exc)
            raise DataError(path, field, message) from None
        if not parsed:  # `{}`: a file cut to its braces (every profile of the benchmark has tasks of both kinds)
            raise DataError(path, None, "holds no task (expected an object of the user's tasks by key)")
        expected_md = path.name == "tasks_md.json"
        for key, task in parsed.items():
            if (task.task_id.startswith("MD-")) != expected_md:
                raise DataError(path, f"{key}.task_id", f"{task.task_id!r} does not belong in {path.name}")
            if not expected_md and len(task.domains) != 1:
                raise DataError(path, f"{key}.Relevant Domains", "a single-domain task names exactly one domain")
        return list(parsed.values())

    def _situation(self, situation: Situation) -> Situation:
        """One object per distinct situation (a frozen model; situations repeat across a user's tasks and users:
        the 50-profile sample's 4,096 scenarios have 1,245)."""
        return self._situations.setdefault(situation.as_values(), situation)

    def _intern(self, task: UserTask) -> Task:
        key = (task.task_id, task.description, task.user_intent, task.goal, task.preference_types, task.domains)
        shared = self._interned.get(key)
        if shared is None:
            shared = Task.model_validate(task.model_dump(exclude={"situation"}))
            self._interned[key] = shared
        return shared


def _catalogue_task(path: Path, line_no: int, line: str, folder: str) -> Task:
    where = f"line {line_no}"
    try:
        raw = _CATALOGUE_LINE.validate_json(line)
    except ValidationError as exc:
        raise DataError(path, where, describe_validation_error(exc)[1]) from None
    number = raw.get("Task Number")
    if not isinstance(number, int):
        raise DataError(path, f"{where}.Task Number", "expected an integer")
    if folder == "Multi-Domain":
        raw["task_id"] = f"MD-task-{number}"
    else:
        raw["task_id"] = f"SD-{folder}-task-{number}"
        raw.setdefault("Relevant Domains", [folder])
    try:
        return Task.model_validate(raw)
    except ValidationError as exc:
        field, message = describe_validation_error(exc)
        raise DataError(path, f"{where}.{field}", message) from None


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError(path, None, "file not found") from None
    except OSError as exc:
        raise DataError(path, None, f"cannot be read ({exc.strerror})") from None


def _read_text(path: Path) -> str:
    try:
        return _read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(path, None, f"not UTF-8 text (byte {exc.start})") from None

