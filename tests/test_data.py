"""The data layer: bundled sample, upstream-layout loader, selection, one-line errors."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from personalens_testkit.data import DOMAINS, Selection, TaskKind, bundled_root, open_dataset, select_scenarios
from personalens_testkit.data.context import build_context
from personalens_testkit.data.samples import SAMPLES
from personalens_testkit.data.selection import parse_domains, parse_profiles
from personalens_testkit.errors import DataError, UsageError


@pytest.fixture(scope="module")
def bundled():
    return open_dataset()


def test_bundled_sample_yields_the_papers_counts(bundled):
    scenarios = select_scenarios(bundled, Selection())
    kinds = Counter(s.kind for s in scenarios)
    assert kinds == {TaskKind.SD: 3283, TaskKind.MD: 813}
    assert len({s.scenario_id for s in scenarios}) == 4096
    assert bundled.user_numbers() == sorted(SAMPLES["50"])


def test_bundled_data_ships_notice_and_licence():
    root = bundled_root()
    assert "CC BY-NC 4.0" in (root / "NOTICE.md").read_text()
    assert (root / "LICENSE.md").stat().st_size > 10_000
    assert (root / "res" / "schema.json").is_file()


def test_catalogue_has_111_tasks_matching_the_user_copies(bundled):
    catalogue = bundled.catalogue()
    assert len(catalogue) == 111
    assert sum(t.kind is TaskKind.MD for t in catalogue.values()) == 25
    for scenario in bundled.scenarios_for(7):
        assert catalogue[scenario.task.task_id] == scenario.task


def test_scenario_ids_are_readable_and_stable(bundled):
    ids = [s.scenario_id for s in bundled.scenarios_for(1377)]
    assert ids[0] == "user1377-SD-Alarm-task-1"
    assert "user1377-SD-RentalCars-task-1" in ids
    assert "user1377-MD-task-25" in ids
    assert ids == [s.scenario_id for s in open_dataset().scenarios_for(1377)]


def test_task_texts_are_shared_between_users(bundled):
    a = {s.task.task_id: s.task for s in bundled.scenarios_for(7)}
    b = {s.task.task_id: s.task for s in bundled.scenarios_for(53)}
    shared = set(a) & set(b)
    assert shared and all(a[t] is b[t] for t in shared)


def test_equal_situations_are_one_object_and_each_scenario_keeps_its_own(bundled):
    """The situations are shared by value (the sample's 4,096 scenarios have 1,245): each scenario's is still exactly
    the one its user's tasks file gives it."""
    labels = ("Location", "Device", "Time of Day", "Day of the Week", "Environment")
    objects, checked = set(), 0
    for number in bundled.user_numbers():
        files = [bundled.data_dir / "profile" / f"user{number}" / name for name in ("tasks.json", "tasks_md.json")]
        raw = [tuple(task["situations"][label] for label in labels)
               for path in files for task in json.loads(path.read_text(encoding="utf-8")).values()]
        scenarios = bundled.scenarios_for(number)
        assert [s.situation.as_values() for s in scenarios] == raw
        objects |= {id(s.situation) for s in scenarios}
        checked += len(scenarios)
    assert checked == 4096 and len(objects) == 1245


def test_selection_by_profiles_domains_and_kind(bundled):
    only = select_scenarios(bundled, Selection(profiles=(7,), domains=("Movies",)))
    assert [s.scenario_id for s in only] == [f"user7-SD-Movies-task-{n}" for n in range(1, 5)]
    md = select_scenarios(bundled, Selection(profiles=(7, 53), task_kind="md"))
    assert md and all(s.kind is TaskKind.MD for s in md)
    # a multi-domain task is kept only when all its domains are selected
    pair = select_scenarios(bundled, Selection(profiles=(7,), domains=("Music", "Events")))
    assert "user7-MD-task-3" in [s.scenario_id for s in pair]
    assert all(set(s.domains) <= {"Music", "Events"} for s in pair)


def test_sample_30_is_a_subset_and_100_needs_the_full_data(bundled):
    assert len({s.user_id for s in select_scenarios(bundled, Selection(sample="30"))}) == 30
    with pytest.raises(UsageError, match=r"--sample 100: 50 profile\(s\) not in bundled .*--personalens-data"):
        select_scenarios(bundled, Selection(sample="100"))
    with pytest.raises(UsageError, match="--profiles: 1 profile"):
        select_scenarios(bundled, Selection(profiles=(8,)))


@pytest.mark.parametrize("text, expected", [
    ("7,53", (7, 53)), ("user7, user53", (7, 53)), ("7,7", (7,)), ("USER12", (12,)),
])
def test_parse_profiles(text, expected):
    assert parse_profiles(text) == expected


@pytest.mark.parametrize("text", ["", "seven", "7;8", "user-7"])
def test_parse_profiles_rejects(text):
    with pytest.raises(UsageError, match="--profiles"):
        parse_profiles(text)


def test_parse_domains_is_forgiving_about_case_and_spaces():
    assert parse_domains("movies, rental_cars,RentalCars") == ("Movies", "Rental Cars")
    with pytest.raises(UsageError, match="'Moviez' is not a benchmark domain"):
        parse_domains("Moviez")
    assert len(DOMAINS) == 20


def test_full_layout_is_read_from_a_checkout_root_or_its_data_folder(data_copy: Path):
    for path in (data_copy, data_copy / "data"):
        dataset = open_dataset(path)
        assert dataset.user_numbers() == [7, 53]
        assert len(select_scenarios(dataset, Selection(sample="all"))) == len(
            bundled_root_scenarios(7) + bundled_root_scenarios(53))


def bundled_root_scenarios(number: int):
    return open_dataset().scenarios_for(number)


def test_context_holds_only_the_tasks_domains(bundled):
    scenario = next(s for s in bundled.scenarios_for(7) if s.task.task_id == "MD-task-3")
    ctx = build_context(bundled, scenario)
    assert list(ctx.preferences) == list(scenario.domains) == list(ctx.interactions)
    assert "user_id" not in ctx.demographics


# -- bad data: one line naming the file and the field -----------------------------------

def _first_task_key(path: Path) -> str:
    return next(iter(json.loads(path.read_text())))


def test_missing_field_names_file_and_field(data_copy: Path):
    path = data_copy / "data" / "profile" / "user7" / "tasks.json"
    data = json.loads(path.read_text())
    key = _first_task_key(path)
    del data[key]["Task Goal"]
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as err:
        open_dataset(data_copy).scenarios_for(7)
    assert str(err.value) == f"{path}: {key}.Task Goal: Field required"
    assert "\n" not in str(err.value)


def test_truncated_file_is_reported_as_invalid_json(data_copy: Path):
    path = data_copy / "data" / "profile" / "user7" / "profile.json"
    path.write_text(path.read_text()[:500])
    with pytest.raises(DataError, match=rf"^{path}: \(document\): not valid JSON"):
        open_dataset(data_copy).profile("user7")


def test_wrong_situation_type_names_the_nested_field(data_copy: Path):
    path = data_copy / "data" / "profile" / "user53" / "tasks_md.json"
    data = json.loads(path.read_text())
    key = next(iter(data))
    data[key]["situations"]["Device"] = 3
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=rf"{key}\.situations\.Device: Input should be a valid string"):
        open_dataset(data_copy).scenarios_for(53)


def test_missing_domain_in_profile_names_the_field(data_copy: Path):
    path = data_copy / "data" / "profile" / "user7" / "profile.json"
    data = json.loads(path.read_text())
    del data["affinities"]["Movies"]
    path.write_text(json.dumps(data))
    dataset = open_dataset(data_copy)
    scenario = next(s for s in dataset.scenarios_for(7) if s.task.task_id == "SD-Movies-task-1")
    with pytest.raises(DataError, match=r"profile.json: affinities.Movies: missing, but task SD-Movies-task-1 needs it"):
        build_context(dataset, scenario)


def test_missing_file_and_missing_layout(data_copy: Path, tmp_path: Path):
    (data_copy / "data" / "profile" / "user7" / "tasks_md.json").unlink()
    with pytest.raises(DataError, match=r"tasks_md.json: file not found"):
        open_dataset(data_copy).scenarios_for(7)
    with pytest.raises(DataError, match="not an upstream PersonaLens layout"):
        open_dataset(tmp_path)


def test_catalogue_line_errors_name_the_line(data_copy: Path):
    path = data_copy / "data" / "task" / "Alarm" / "task.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"User Intent"', '"Intent"')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"Alarm/task.jsonl: line 2.User Intent: Field required"):
        open_dataset(data_copy).catalogue()


_ORIGINAL = (bundled_root() / "data" / "profile" / "user7" / "tasks.json").read_bytes()
_PROFILE = (bundled_root() / "data" / "profile" / "user7" / "profile.json").read_bytes()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=len(_ORIGINAL) - 1), noise=st.binary(max_size=8))
@example(cut=0, noise=b"{}")  # cut to a whole, empty object: valid JSON, no task (found by a run of this test)
@example(cut=1, noise=b" }")
def test_any_truncated_or_garbled_tasks_file_gives_a_data_error(data_copy: Path, cut: int, noise: bytes):
    path = data_copy / "data" / "profile" / "user7" / "tasks.json"
    path.write_bytes(_ORIGINAL[:cut] + noise)
    with pytest.raises(DataError) as err:
        open_dataset(data_copy).scenarios_for(7)
    assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["demographics", "affinities", "interests", "interactions"]), value=json_values)
def test_any_malformed_profile_field_gives_a_data_error_or_loads(data_copy: Path, field: str, value):
    data = json.loads(_PROFILE)
    data[field] = value
    path = data_copy / "data" / "profile" / "user7" / "profile.json"
    path.write_text(json.dumps(data))
    dataset = open_dataset(data_copy)
    try:
        profile = dataset.profile("user7")
    except DataError as err:
        assert str(err).startswith(f"{path}: ")
        assert "\n" not in str(err)
    else:  # the replacement happened to be valid: the loaded value is what was written
        assert profile.model_dump(by_alias=True)[field] == value


def test_cli_data_stats_and_check(capsys, data_copy):
    from personalens_testkit.cli import main

    assert main(["data", "stats"]) == 0
    assert "bundled 50-profile sample: 50 profiles, 4096 scenarios (3283 single-domain, 813 multi-domain)" in capsys.readouterr().out
    assert main(["data", "check", "--personalens-data", str(data_copy)]) == 0
    assert "checked 2 profiles" in capsys.readouterr().out
    (data_copy / "data" / "profile" / "user53" / "profile.json").write_text("{")
    assert main(["data", "check", "--personalens-data", str(data_copy)]) == 1
    out = capsys.readouterr().out
    assert "user53/profile.json: (document): not valid JSON" in out and "1 problem(s)" in out
    assert main(["data", "stats", "--personalens-data", "/nowhere"]) == 2
    assert capsys.readouterr().err.startswith("personalens: error: /nowhere: no such folder")
