"""bench/nodes.py's pure pieces: the runs it submits, the order of the sides, how a run's
speed and the repeats' figure are read."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import yaml

from grpo.spec import JobSpec
from tests.bench_module import load_bench

SPEC = Path(__file__).resolve().parents[2] / "bench" / "scaling-small.yaml"


def nodes() -> ModuleType:
    return load_bench("nodes")


def test_each_side_is_the_spec_on_its_nodes_and_queue_cut_to_the_steps_without_checkpoints() -> (
    None
):
    bench = nodes()
    data = yaml.safe_load(SPEC.read_text())
    queues = {"nodes": "q-a", "one": "q-a-one"}
    two, one = (
        JobSpec.model_validate(bench.run_spec(data, s, 5, queues)) for s in ("nodes", "one")
    )
    assert (two.resources.num_nodes, two.resources.num_processes, two.resources.queue) == (
        2,
        1,
        "q-a",
    )
    assert (one.resources.num_nodes, one.resources.num_processes, one.resources.queue) == (
        1,
        1,
        "q-a-one",
    )
    for spec in (two, one):
        assert (spec.max_steps, spec.save_steps, spec.save_final) == (5, 0, False)
        assert spec.model == data["model"] and spec.prompts_per_step == data["prompts_per_step"]


def test_the_sides_alternate_which_runs_first() -> None:
    bench = nodes()
    assert [bench.order(r) for r in range(3)] == [
        ("nodes", "one"),
        ("one", "nodes"),
        ("nodes", "one"),
    ]


def test_a_runs_speed_leaves_out_its_first_step() -> None:
    steps_per_second = nodes().steps_per_second
    assert steps_per_second([100.0, 2.0, 4.0, 3.0]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="at least 2 steps"):
        steps_per_second([1.0])


def test_the_last_line_is_the_median_speedup_and_its_spread() -> None:
    line = nodes().summary([1.5, 1.2, 1.7])
    assert line == "nodes: speedup=1.500 spread=1.200-1.700 repeats=3"


def test_log_lines_are_timed_from_the_runs_creation() -> None:
    items = [
        {
            "message": "worker a claimed node 0 of 2",
            "created_at": "2026-12-06T08:00:01.500000+00:00",
        },
        {"message": "worker b claimed node 1 of 2", "created_at": "2026-12-06T08:00:09+00:00"},
    ]
    offsets = nodes().log_offsets("2026-12-06T08:00:00+00:00", items)
    assert offsets == [(1.5, items[0]["message"]), (9.0, items[1]["message"])]
