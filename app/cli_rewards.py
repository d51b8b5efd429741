"""`grpo rewards test SPEC SAMPLES` and `grpo rewards preflight SPEC`: a spec's rewards
checked before a run, through the server (POST /api/rewards/test and /preflight), printed
as tables: each sample's score per function with its time or its failure's kind, and each
probe's mean score per function with the holes found."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.cli_client import CLIENT_ERRORS, said_client_error
from grpo.client import GrpoClient
from grpo.spec.yaml_input import load_yaml


def add_parser(
    parser: argparse.ArgumentParser, *, server_options: Callable[[argparse.ArgumentParser], None]
) -> None:
    """`grpo rewards test|preflight`, each action with the server options."""
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    test = actions.add_parser("test", help="score samples with a spec's rewards")
    test.add_argument("spec", help="the spec's YAML or JSON file (its rewards and answer field)")
    test.add_argument("samples", help='a JSONL file: {"prompt", "completion", columns...} a line')
    test.add_argument("--timeout", type=float, default=10.0, help="seconds per call (default 10)")
    preflight = actions.add_parser("preflight", help="probe a spec's rewards for holes")
    preflight.add_argument("spec", help="the spec's YAML or JSON file")
    preflight.add_argument("--records", type=int, default=4, help="records probed (default 4)")
    for action in (test, preflight):
        server_options(action)


def rewards(args: Any, client: GrpoClient) -> int:
    """Run the action; 0 when every function scored every sample (test) or no hole was
    found (preflight), 1 otherwise, 2 when the server refused or could not be reached."""
    try:
        spec = load_yaml(Path(args.spec).read_text(encoding="utf-8"), source=args.spec)
        if not isinstance(spec, dict):
            raise ValueError(f"{args.spec}: expected a mapping (a JobSpec)")
        if args.action == "test":
            return score_samples(client, spec, Path(args.samples), timeout=args.timeout)
        return probe_spec(client, spec, records=args.records)
    except CLIENT_ERRORS as exc:
        return said_client_error(exc, client)


def score_samples(
    client: GrpoClient, spec: dict[str, Any], samples_path: Path, *, timeout: float
) -> int:
    lines = samples_path.read_text(encoding="utf-8").splitlines()
    samples = [json.loads(line) for line in lines if line.strip()]
    data = spec.get("data") or {}
    body = {
        "rewards": spec.get("rewards") or [{"name": "accuracy"}, {"name": "format"}],
        "samples": samples,
        "answer_field": data.get("answer_field", "answer"),
        "timeout_s": timeout,
    }
    results = client.reward_test(body)["results"]
    labels = list(results[0]["scores"]) if results else []
    rows = [[str(i), *(cell(r, label) for label in labels)] for i, r in enumerate(results)]
    print_table(["sample", *labels], rows)
    failures = [(i, f) for i, r in enumerate(results) for f in r["failures"]]
    for i, f in failures:
        print(f"sample {i} {f['label']}: {f['kind']}: {f['message']}")
    return 1 if failures else 0


def cell(result: dict[str, Any], label: str) -> str:
    failed = [str(f["kind"]) for f in result["failures"] if f["label"] == label]
    if failed:
        return failed[0]
    score = result["scores"][label]
    seconds = result["seconds"].get(label, 0.0)
    return f"{'null' if score is None else f'{score:.4g}'} ({seconds * 1000:.1f} ms)"


def probe_spec(client: GrpoClient, spec: dict[str, Any], *, records: int) -> int:
    report = client.reward_preflight({"spec": spec, "records": records})
    probes = report["probes"]
    labels = list(probes[0]["result"]["scores"]) if probes else []
    order = list(dict.fromkeys(p["probe"] for p in probes))
    rows = [[probe, *(mean_cell(probes, probe, label) for label in labels)] for probe in order]
    print(f"{report['records']} records probed")
    print_table(["probe", *labels], rows)
    if report.get("stopped"):
        print(f"stopped early: {report['stopped']}")
    for finding in report["findings"]:
        print(f"- {finding['message']}")
    if not report["findings"]:
        print("no probe scores at or above a correct completion")
    return 1 if report["findings"] else 0


def mean_cell(probes: list[dict[str, Any]], probe: str, label: str) -> str:
    scores = [p["result"]["scores"][label] for p in probes if p["probe"] == probe]
    known = [s for s in scores if s is not None]
    if not known:
        return "failed" if scores else ""
    return f"{sum(known) / len(known):.3g}" + ("" if len(known) == len(scores) else "*")


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(t.ljust(w) for t, w in zip(row, widths, strict=True)).rstrip())
