"""`grpo doctor`'s lines: the sparkline, and the link that opens a clone with the change."""

from __future__ import annotations

from app.cli_doctor import clone_url, describe, sparkline


def test_sparkline_spans_the_blocks_from_lowest_to_highest() -> None:
    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert sparkline([2.0, 2.0]) == "▁▁" and sparkline([]) == ""


def test_clone_url_sets_each_suggested_field_as_json_and_skips_those_without_a_value() -> None:
    suggestions = [
        {"field": "learning_rate", "value": 3e-5, "reason": ""},
        {"field": "dynamic_sampling.enabled", "value": True, "reason": ""},
        {"field": "data.source", "value": None, "reason": "harder prompts"},
    ]
    assert clone_url("http://h:8000/", "r1", suggestions) == (
        "http://h:8000/runs/new?from=r1&set=learning_rate%3D3e-05"
        "&set=dynamic_sampling.enabled%3Dtrue"
    )
    assert clone_url("http://h", "r1", suggestions[2:]) is None


def test_a_finding_reads_as_its_sentence_evidence_groups_and_changes() -> None:
    finding = {
        "id": "truncation@5", "rule": "truncation", "title": "Completions truncated",
        "severity": "critical", "status": "open", "first_step": 5, "last_step": 9,
        "message": "87% of completions hit max_completion_length.",
        "evidence": {"metric": "completions/clipped_ratio", "values": [[4, 0.0], [5, 0.9]],
                     "facts": {"completions/clipped_ratio": 0.87},
                     "groups": [{"step": 9, "index": 1, "note": "2 of 2 cut at the limit"}],
                     "completions": []},
        "suggestions": [{"field": "max_completion_length", "value": 4, "reason": "room"}],
    }  # fmt: skip
    lines = describe(finding, base="http://h", run_id="r1")
    assert lines[0].startswith("CRITICAL  Completions truncated  [truncation]  steps 5-9  open")
    assert lines[2] == "  evidence: completions/clipped_ratio ▁█  completions/clipped_ratio 0.87"
    assert lines[3] == "  group: http://h/runs/r1/steps/9/groups/1  (2 of 2 cut at the limit)"
    assert lines[4] == "  try: max_completion_length: 4  - room"
    assert (
        lines[5]
        == "  clone with this change: http://h/runs/new?from=r1&set=max_completion_length%3D4"
    )
