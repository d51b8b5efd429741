"""`grpo submit`'s local data: a spec's `data.source` or `eval.source` that names a file on
this machine which the server would refuse (outside its roots, or on another machine) is
uploaded as a dataset first (POST /api/datasets), and the spec is submitted naming it.

A relative path is read from the working directory, as `grpo train` reads it. A path the
server itself accepts (inside its GRPO_MODEL_ROOTS or its datasets, asked through POST
/api/specs/check) is left for the server to read in place. Each upload is one line on
stderr, after a progress bar of the bytes sent when stderr is a terminal. The server keeps
every upload as a dataset of its own: it does not compare contents, so submitting twice
uploads the file twice. That is why nothing goes up while the spec has problems outside its
data and eval sections (a misspelt knob, an unknown reward, a model path): the server would
refuse the spec whatever its data, and each corrected try would store the file again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from grpo.client import ApiClientError, GrpoClient
from grpo.spec.sources import parse_data_source

SECTIONS = ("data", "eval")
"""The spec's sections whose `source` may name a local file (`data.source`, `eval.source`)."""


@dataclass(frozen=True)
class LocalData:
    """A local file a spec's section names, with the fields its records are read by."""

    section: str
    text: str
    """The source as the spec writes it."""
    path: Path
    prompt_field: str
    answer_field: str
    """Empty: the records have no answer (answer_field null)."""


def local_files(spec: dict[str, Any]) -> list[LocalData]:
    """Each `data.source` and `eval.source` that is a local path naming a file here."""
    found = []
    given = spec.get("data")
    data: dict[str, Any] = given if isinstance(given, dict) else {}
    for section in SECTIONS:
        part = spec.get(section)
        if not isinstance(part, dict) or not isinstance(part.get("source"), str):
            continue
        try:
            source = parse_data_source(part["source"])
        except ValueError:
            continue  # the server words it
        path = Path(source.value).expanduser()
        if source.kind != "local" or not path.is_file():
            continue
        prompt = part.get("prompt_field") or data.get("prompt_field") or "prompt"
        answer = part.get("answer_field") if section == "eval" else None
        if answer is None:
            answer = data.get("answer_field", "answer")
        found.append(LocalData(section, part["source"], path, prompt, answer or ""))
    return found


def server_reads_it(client: GrpoClient, text: str) -> bool:
    """Whether the server accepts `text` as a data source as it is (a path inside its roots)."""
    problems = client.check_spec({"model": "builtin:tiny", "data": {"source": text}})
    return not any(p["loc"] == "data.source" for p in problems)


def other_problems(client: GrpoClient, spec: dict[str, Any]) -> list[str]:
    """The fields of the spec's problems outside its data and eval sections, which the
    server refuses whatever the data names (none when it will not check)."""
    try:
        problems = client.check_spec(spec)
    except ApiClientError:
        return []
    return [p["loc"] for p in problems if str(p["loc"]).split(".")[0] not in SECTIONS]


def upload_local_data(
    client: GrpoClient, spec: dict[str, Any], *, err: TextIO | None = None
) -> dict[str, Any]:
    """`spec` with each local file the server would refuse uploaded and named as
    `dataset:<id>`; one line on `err` for each. While the spec has problems elsewhere it is
    returned as it is, nothing uploaded, a line on `err` for each file saying why."""
    err = sys.stderr if err is None else err  # at call time: the stderr of now
    uploaded: dict[tuple[Path, str, str], dict[str, Any]] = {}
    out = dict(spec)
    refused = [local for local in local_files(spec) if not server_reads_it(client, local.text)]
    blocking = other_problems(client, spec) if refused else []
    if blocking:
        for local in refused:
            print(
                f"{local.section}.source {local.text}: not uploaded: the spec has problems to "
                f"fix first ({', '.join(blocking)}), and each try would store the file again",
                file=err,
            )
        return out
    for local in refused:
        key = (local.path.resolve(), local.prompt_field, local.answer_field)
        if key not in uploaded:
            uploaded[key] = _upload(client, local, err)
        dataset = uploaded[key]
        out[local.section] = {**spec[local.section], "source": dataset["source"]}
        records = f"{dataset['num_records']:,} record{'' if dataset['num_records'] == 1 else 's'}"
        print(
            f"{local.section}.source {local.text}: uploaded as {dataset['source']} "
            f"({records}, {dataset['num_bytes']:,} bytes); the run reads {dataset['source']}",
            file=err,
        )
    return out


def _upload(client: GrpoClient, local: LocalData, err: TextIO) -> dict[str, Any]:
    size = local.path.stat().st_size
    with tqdm(
        total=size,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=f"uploading {local.path.name}",
        file=err,
        disable=not err.isatty(),
        leave=False,
    ) as bar:
        return client.upload_dataset(
            local.path,
            name=local.path.name,
            prompt_field=local.prompt_field,
            answer_field=local.answer_field,
            sent=bar.update,
        )
