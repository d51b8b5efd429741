"""`grpo doctor <run>`: the run doctor's findings in the terminal, as the run page's Doctor
card shows them: one sentence each, a sparkline of its evidence, the groups behind it and
the spec changes to try, with the link that opens the new-run page with them set."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

from grpo.client import GrpoClient

SPARKS = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 40
MAX_TEXT = 300
"""Characters of a completion printed (a preflight probe's may be longer)."""


def sparkline(values: list[float]) -> str:
    """The last SPARK_POINTS values as block characters, lowest to highest."""
    values = values[-SPARK_POINTS:]
    if not values:
        return ""
    low, high = min(values), max(values)
    span = high - low or 1.0
    return "".join(SPARKS[round((v - low) / span * (len(SPARKS) - 1))] for v in values)


def clone_url(base: str, run_id: str, suggestions: list[dict[str, Any]]) -> str | None:
    """The new-run page with the run's spec and the suggested fields set (those with a value)."""
    changes = [(s["field"], s["value"]) for s in suggestions if s["value"] is not None]
    if not changes:
        return None
    query = urlencode(
        [("from", run_id), *(("set", f"{f}={json.dumps(v)}") for f, v in changes)],
        quote_via=quote,
    )
    return f"{base.rstrip('/')}/runs/new?{query}"


def describe(finding: dict[str, Any], *, base: str, run_id: str) -> list[str]:
    """The lines of one finding."""
    evidence = finding["evidence"]
    steps = f"steps {finding['first_step']}-{finding['last_step']}"
    if not evidence["metric"]:  # the reward preflight's, found before the first step
        steps = "reward preflight"
    lines = [
        f"{finding['severity'].upper():<8}  {finding['title']}  [{finding['rule']}]  "
        f"{steps}  {finding['status']}",
        f"  {finding['message']}",
    ]
    values = [v for _, v in evidence["values"]]
    facts = ", ".join(f"{k} {v:.4g}" for k, v in evidence["facts"].items())
    lines.append(f"  evidence: {evidence['metric']} {sparkline(values)}  {facts}".rstrip())
    for group in evidence["groups"]:
        url = f"{base.rstrip('/')}/runs/{run_id}/steps/{group['step']}/groups/{group['index']}"
        lines.append(f"  group: {url}  ({group['note']})")
    for c in evidence["completions"]:
        text = c["text"] if len(c["text"]) <= MAX_TEXT else f"{c['text'][:MAX_TEXT]}…"
        where = c.get("note") or f"step {c['step']}, group {c['group']}"
        lines.append(
            f"  completion: {text!r} scored {c['reward']:g}, answer {c['answer']!r} ({where})"
        )
    for i, s in enumerate(finding["suggestions"]):
        value = "(see why)" if s["value"] is None else json.dumps(s["value"])
        lines.append(f"  {'try:' if i == 0 else '    '} {s['field']}: {value}  - {s['reason']}")
    clone = clone_url(base, run_id, finding["suggestions"])
    if clone:
        lines.append(f"  clone with this change: {clone}")
    return lines


def doctor(client: GrpoClient, run_id: str) -> int:
    found = client.diagnostics(run_id)
    items = found["items"]
    opened = sum(1 for f in items if f["status"] == "open")
    print(
        f"run {run_id}: diagnosed through step {found['step']} (rules v{found['rules_version']}): "
        f"{len(items)} finding{'s' if len(items) != 1 else ''}, {opened} open"
    )
    if not found.get("is_current", True):
        print("  (a long stored run, still being diagnosed: run this again for the rest)")
    base = str(client.http.base_url)
    for finding in items:
        print()
        print("\n".join(describe(finding, base=base, run_id=run_id)))
    return 0
