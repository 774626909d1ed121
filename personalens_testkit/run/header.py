"""The run header: what runs (data, assistant and its prompt, user agent, judge and its calibration, preset)
and what the run will do with cassettes, shards, resumed results, expectations and gates - and a word when
``-n`` asks for more xdist workers than the machine has cores."""

from __future__ import annotations

from typing import Sequence

from ..costs.estimate import format_estimate
from ..costs.spend import format_cost
from ..data.models import case_id
from ..errors import UsageError
from ..gating.expectations import location
from ..llm.registry import describe
from .cost_estimate import run_estimate
from .lanes import describe as describe_lanes, of_run, usable_cores
from .state import Run


def check_calibration(run: Run) -> None:
    """A named calibration report is readable and is this judge's; with ``require_calibrated_judge``, a run
    whose gates count (anything under test live) needs a passing one."""
    s = run.settings
    report = run.calibration
    judge = s.role_models["judge"].label
    if report is not None and report.judge_model != judge:
        raise UsageError(f"--judge-calibration {s.judge_calibration}: it calibrates {report.judge_model}, but this run's "
                         f"judge is {judge}: run `personalens calibrate --judge-model {s.judge_model}`")
    if not s.require_calibrated_judge or run.recording.plan.checks_reproduction:
        return
    if report is None:
        raise UsageError(f"require_calibrated_judge: the judge {judge} has no calibration; run `personalens calibrate "
                         f"--judge-model {s.judge_model}` and name its report with --judge-calibration")
    if not report.passed:
        raise UsageError(f"require_calibrated_judge: the judge {judge} failed its calibration "
                         f"({s.judge_calibration}: {'; '.join(report.failures[:3])})")


def identity_lines(run: Run) -> list[str]:
    s = run.settings
    assistant = run.assistant
    parts = [f"model {s.assistant_model}" if assistant.kind == "reference" else f"kind {assistant.kind}",
             f"context {assistant.context.label}"]
    if assistant.prompt_variant is not None:
        parts.append(f"prompt {assistant.prompt_variant}")
    lines = [f"data {s.data_path or 'bundled 50-profile sample'}; assistant {s.assistant} ({', '.join(parts)}); "
             f"user agent {s.user_model}; judge {s.judge_model}"
             + (f"; turn-level {s.turn_level_method}" if s.turn_level else "")
             + (f"; the user agent reviewed by {s.review_user_model}" if s.review_user else "")]
    if s.preset:
        lines.append(f"preset {s.preset}: user agent {describe(s.user_model, s.models)}, judge "
                     f"{describe(s.judge_model, s.models)}, reference assistant {describe(s.assistant_model, s.models)}"
                     " (options given explicitly win over a preset)")
    calibration = run.calibration
    if calibration is not None:
        lines.append(f"judge calibration {run.recording.shown(s.judge_calibration)}: {calibration.summary_line()}")
    return lines


def workers_line(workers: int, concurrency: int, *, embedded: bool, cores: int) -> str | None:
    """When ``-n`` asks for more xdist workers than there are cores: what each costs and what to use instead."""
    if workers <= cores:
        return None
    cost = (f"-n {workers} on {cores} core{'s' if cores > 1 else ''}: each xdist worker is a whole pytest process "
            "(about 115 MB, seconds of CPU to start)")
    if embedded:
        return f"{cost}, and the embedded model serves one scenario at a time: run without -n"
    lanes = workers * concurrency
    if cores == 1:
        return (f"{cost}; for a model-bound run use --concurrency {lanes} (scenarios at once in threads of one "
                f"process), or --concurrency auto without -n")
    each = -(-lanes // cores)
    return (f"{cost}; for a model-bound run use -n {cores} --concurrency {each} ({each} scenarios at once in threads "
            f"of each worker), or --concurrency auto without -n")


def header_lines(run: Run, workers: int = 0) -> list[str]:
    """What this run will do with cassettes, shards, resumed results and gates (``workers``: xdist's ``-n``)."""
    lines = [run.recording.summary(), *run.cases.header_lines()]
    spread = workers_line(workers, of_run(run), embedded=run.models.uses_embedded, cores=usable_cores())
    lines += [spread] if spread else []
    picked = describe_lanes(run.settings.concurrency, of_run(run), workers)
    lines += [picked] if picked else []
    lines += cost_lines(run)
    if run.settings.stop_when_decided:
        lines.append(f"order: stratified random by task kind and domain, seed {run.settings.order_seed} "
                     f"(--order-seed); stops starting cases once the gates and the baseline are decided at "
                     f"{run.thresholds.aggregate.confidence:.0%} confidence (a confidence sequence per test, Bonferroni)")
    if run.expectations is not None:
        known = sum(1 for e in run.expectations.scenarios.values() if e.outcome != "pass")
        path = location(run.settings.expectations, run.settings.cassette_dir, run.settings.assistant)
        lines.append(f"expectations {run.recording.shown(path)}: {known} scenarios expected to fail or flaky (xfail); "
                     "any other failure is a regression")
    if not run.thresholds.aggregate.gates:
        lines.append(f"NO AGGREGATE GATE is set in {run.recording.shown(run.settings.thresholds_path)}: the run is "
                     "judged by the per-scenario floors alone")
    return lines


def cost_lines(run: Run) -> list[str]:
    """A live run's cost estimate (the same as `personalens estimate`), and its budget; a budget whose spend cannot
    be priced is refused."""
    s = run.settings
    if not _shows_estimate(run):
        return []
    estimate = run.estimate
    lines = format_estimate(estimate)
    if s.max_cost is not None:
        unknown = [r for r in estimate.roles if r.cost is None and not (r.role == "assistant" and run.assistant.is_bot)]
        if unknown:
            raise UsageError(f"--max-cost: the {unknown[0].role.replace('_', ' ')}'s cost is unknown ({unknown[0].unknown}): "
                             "a budget needs every spending role priced")
        lines.append(f"budget --max-cost {format_cost(s.max_cost)}: no case starts once the spend would pass it"
                     + (" (the bot's own model calls are not counted)" if run.assistant.is_bot else ""))
    return lines


def collected_cost_lines(run: Run, collected: Sequence[str]) -> list[str]:
    """The estimate again for the cases pytest collected (``collected``: their case ids), when its own selection
    (``-k``, ``-m``, node ids, ``--deselect``) left fewer than the run's settings select - the header's estimate
    is for those. Nothing when the header showed no estimate or every selected case was collected."""
    s = run.settings
    selected = run.recording.plan.runnable
    if not _shows_estimate(run):
        return []
    chosen = set(collected)
    cases = [(scenario, repeat) for scenario, repeat in selected if case_id(scenario.scenario_id, repeat) in chosen]
    if len(cases) >= len(selected):
        return []
    return [f"the estimate again, for the {len(cases)} case(s) pytest collected of the {len(selected)} the settings "
            "select (-k, -m, node ids): it replaces the one above", *format_estimate(run_estimate(s, run.cases.dataset, cases))]


def _shows_estimate(run: Run) -> bool:
    """Whether the run shows a cost estimate: something is called live, or a budget needs one."""
    return bool(run.recording.live_roles) or run.settings.max_cost is not None

