"""Client commands of the `grpo` CLI: submit (and follow), runs, cancel, resume, clone, logs,
export, doctor, datasets."""

from __future__ import annotations

import sys
import tarfile
import uuid
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from app.cli_datasets import datasets
from app.cli_doctor import doctor
from app.cli_upload import upload_local_data
from grpo.client import ApiClientError, GrpoClient
from grpo.spec.yaml_input import load_yaml


def submit(client: GrpoClient, spec_path: str, *, follow: bool, upload: bool = True) -> int:
    """Submit the spec at `spec_path` (`-`: standard input); `upload`: its local data files
    go up as datasets first (app/cli_upload.py)."""
    if spec_path == "-":
        spec = load_yaml(sys.stdin.read(), source="<stdin>")
    else:
        spec = load_yaml(Path(spec_path).read_text(encoding="utf-8"), source=spec_path)
    if upload and isinstance(spec, dict):
        spec = upload_local_data(client, spec)
    if isinstance(spec, dict):
        warn(client, spec)
    run = client.submit(spec, idempotency_key=uuid.uuid4().hex)
    print(f"run {run['id']} {run['status']}: {run['name']}")
    return follow_run(client, run) if follow else 0


def warn(client: GrpoClient, spec: dict[str, Any]) -> None:
    """The server's warnings of `spec` (the new-run page's: a model with random weights
    cannot learn), a line each on stderr. Never a reason not to submit: a server that will
    not check says nothing here, and submit answers for itself."""
    try:
        warnings = client.spec_warnings(spec)
    except ApiClientError:
        return
    for warning in warnings:
        print(f"warning: {warning['loc']}: {warning['message']}", file=sys.stderr)


def follow_run(client: GrpoClient, run: dict[str, Any]) -> int:
    """A progress bar with live reward and KL until the run ends; exit 0 only on success."""
    status = run["status"]
    told: set[tuple[str, str]] = set()
    with tqdm(total=run["total_steps"], unit="step", desc=run["id"]) as bar:
        for kind, data in client.events(run["id"]):
            if kind == "step":
                bar.n = data["step"]
                metrics = data["metrics"]
                bar.set_postfix(
                    reward=f"{metrics.get('reward', 0):.3f}", kl=f"{metrics.get('kl', 0):.4f}"
                )
            elif kind == "status":
                status = data["status"]
                bar.set_description(f"{run['id']} {status}")
            elif kind == "log":  # info too: building or loading a model is no silent wait
                bar.write(f"{data['level']}: {data['message']}")
            elif kind == "diagnosis" and _is_news(data, told):
                bar.write(f"doctor ({data['severity']}): {data['title']}: {data['message']}")
            elif kind == "end":
                status = data["status"]
    final = client.run(run["id"])
    print(
        f"run {final['id']} {final['status']}" + (f": {final['error']}" if final["error"] else "")
    )
    return 0 if status == "succeeded" else 1


def _is_news(finding: dict[str, Any], told: set[tuple[str, str]]) -> bool:
    """An open finding at warning or above not yet told at its severity (a finding is
    rewritten as it grows: its events repeat)."""
    key = (finding["id"], finding.get("severity", ""))
    if finding.get("status") != "open" or key[1] == "info" or key in told:
        return False
    told.add(key)
    return True


def list_runs(client: GrpoClient, *, status: str | None) -> int:
    for run in client.runs(status=status):
        metrics = run["last_metrics"] or {}
        reward = f"{metrics['reward']:.3f}" if "reward" in metrics else "-"
        mark = run.get("doctor")
        doctor = f"  [doctor: {mark['open']} {mark['severity']}]" if mark else ""
        print(
            f"{run['id']}  {run['status']:<9}  {run['step']:>5}/{run['total_steps']:<5}  "
            f"reward {reward:>6}  {run['name']}{doctor}"
        )
    return 0


def cancel(client: GrpoClient, run_id: str) -> int:
    run = client.cancel(run_id)
    print(
        f"run {run['id']} {run['status']}"
        + (" (stops at the next step)" if run["status"] == "running" else "")
    )
    return 0


def resume(client: GrpoClient, run_id: str) -> int:
    run = client.resume(run_id)
    step = run.get("resumes_from_step")
    if step is None:  # a server from before resumes_from_step
        where = "resumes from its last checkpoint, or from step 0 if it saved none"
    elif step:
        where = f"resumes from step {step} (its last checkpoint)"
    else:
        where = "restarts from step 0: no checkpoint was saved"
    print(f"run {run['id']} {run['status']}: {where}")
    return 0


def clone(client: GrpoClient, run_id: str, sets: list[str], *, follow: bool) -> int:
    """A new run with `run_id`'s spec, each FIELD=VALUE of `sets` changed."""
    run = client.clone(run_id, patch_of(sets))
    print(f"run {run['id']} {run['status']}: {run['name']}")
    return follow_run(client, run) if follow else 0


def patch_of(sets: list[str]) -> dict[str, Any]:
    """`["beta=0", "data.split=test"]` -> {"beta": 0, "data": {"split": "test"}}: dotted
    fields nest, values are read as YAML (numbers, booleans, lists)."""
    patch: dict[str, Any] = {}
    for item in sets:
        field, is_set, text = item.partition("=")
        if not is_set or not field.strip():
            raise ValueError(f"--set {item!r}: write FIELD=VALUE, e.g. --set beta=0.01")
        *sections, name = field.strip().split(".")
        node = patch
        for section in sections:
            node = node.setdefault(section, {})
        node[name] = load_yaml(text, source=f"--set {item}") if text.strip() else ""
    return patch


def logs(client: GrpoClient, run_id: str) -> int:
    for line in client.logs(run_id):
        print(f"{line['created_at']}  {line['level']:<7}  {line['message']}")
    return 0


def export(
    client: GrpoClient, run_id: str, directory: Path, *, which: str, merge: bool = False
) -> int:
    """Download a checkpoint (resuming a cut download) and unpack its model into `directory`;
    `merge`: a LoRA adapter arrives merged into full weights."""
    directory.mkdir(parents=True, exist_ok=True)
    part = directory / f".{run_id}-{which}{'-merged' if merge else ''}.tar.gz.part"
    name = client.download_checkpoint(run_id, which, part, merge=merge)
    with tarfile.open(part) as tar:
        members = tar.getmembers()
        top = members[0].name.split("/", 1)[0] if members else ""
        for member in members:  # unpack the archive's one folder straight into `directory`
            member.name = member.name.removeprefix(f"{top}/")
        tar.extractall(directory, members=members, filter="data")
    part.unlink()
    print(f"{name}: {len(members)} files in {directory}")
    return 0


CLIENT_ERRORS = (ApiClientError, httpx.TransportError, OSError, ValueError)
"""What a service command reports in one line and exits 2 on: the server refused, could not
be reached, or a local file could not be read."""


def said_client_error(exc: BaseException, client: GrpoClient) -> int:
    """Print what went wrong talking to the server as one line on stderr; 2."""
    if isinstance(exc, httpx.TransportError):
        print(f"error: cannot reach the server at {client.http.base_url}: {exc}", file=sys.stderr)
    else:
        print(f"error: {exc}", file=sys.stderr)
    return 2


def run_client_command(args: Any, client: GrpoClient) -> int:
    try:
        match args.command:
            case "submit":
                return submit(client, args.spec, follow=args.follow, upload=args.upload)
            case "runs":
                return list_runs(client, status=args.status)
            case "cancel":
                return cancel(client, args.run_id)
            case "resume":
                return resume(client, args.run_id)
            case "clone":
                return clone(client, args.run_id, args.set, follow=args.follow)
            case "datasets":
                return datasets(client, args)
            case "doctor":
                return doctor(client, args.run_id)
            case "export":
                directory = Path(args.directory)
                return export(client, args.run_id, directory, which=args.step, merge=args.merge)
            case _:
                return logs(client, args.run_id)
    except (*CLIENT_ERRORS, tarfile.TarError) as exc:
        return said_client_error(exc, client)
