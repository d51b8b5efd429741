"""One definition of a source: kinds by prefix, and local paths held inside their roots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from huggingface_hub import constants

from grpo.data.loading import load_examples
from grpo.models.loading import resolve_model_path
from grpo.spec import JobSpec
from grpo.spec.data import DataSpec
from grpo.spec.sources import LocalRoots, Source, parse_data_source, parse_model_name, resolve_local


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("builtin:arith", Source("builtin", "builtin:arith")),
        ("dataset:ab_1-2", Source("dataset", "ab_1-2")),
        ("hf:openai/gsm8k:main", Source("hub", "openai/gsm8k:main")),
        ("file:/x/d.jsonl", Source("local", "/x/d.jsonl")),
        ("d.jsonl", Source("local", "d.jsonl")),
        ("org/name", Source("local", "org/name")),  # data: anything without a prefix is a path
    ],
)
def test_data_source_kinds(text: str, expected: Source) -> None:
    assert parse_data_source(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("builtin:tiny", Source("builtin", "builtin:tiny")),
        ("Qwen/Qwen2.5-0.5B-Instruct", Source("hub", "Qwen/Qwen2.5-0.5B-Instruct")),
        ("gpt2", Source("hub", "gpt2")),
        ("hf:org/m.v1", Source("hub", "org/m.v1")),
        ("/models/m", Source("local", "/models/m")),
        ("./m", Source("local", "./m")),
        ("~/m", Source("local", "~/m")),
        ("file:m", Source("local", "m")),
    ],
)
def test_model_kinds(text: str, expected: Source) -> None:
    assert parse_model_name(text) == expected


@pytest.mark.parametrize(
    "text", ["grpo/../../outside", "a/b/c", "org/..", "hf:../x", "x--y", "s3://bucket/m", "file:"]
)
def test_model_names_that_are_neither_kind_cleanly_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_model_name(text)


@pytest.mark.parametrize(
    "text", ["dataset:../secret", "dataset:a/b", "dataset:", "hf:a/../b", "http://x/d.jsonl"]
)
def test_malformed_data_sources_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_data_source(text)


def test_the_spec_refuses_what_the_source_definition_refuses() -> None:
    with pytest.raises(ValueError, match="neither a Hugging Face model id"):
        JobSpec(model="grpo/../../outside")
    with pytest.raises(ValueError, match="unknown source kind"):
        DataSpec(source="s3://bucket/d.jsonl")


def _roots(tmp_path: Path) -> LocalRoots:
    base = tmp_path / "data"
    (base / "datasets").mkdir(parents=True)
    (base / "datasets" / "ok.jsonl").write_text('{"prompt": "p", "answer": "a"}\n')
    (tmp_path / "secret.jsonl").write_text('{"prompt": "secret", "answer": "s"}\n')
    (base / "datasets" / "out.jsonl").symlink_to(tmp_path / "secret.jsonl")
    (base / "datasets" / "outdir").symlink_to(tmp_path)
    return LocalRoots(base=base, allowed=(base / "datasets",))


ESCAPES = [
    "app/../../../../etc/passwd",
    "../secret.jsonl",
    "datasets/../../secret.jsonl",
    "datasets/./x/../../../secret.jsonl",
    "datasets//..//..//secret.jsonl",
    "datasets/out.jsonl",  # a symlink out of the root
    "datasets/outdir/secret.jsonl",  # a directory symlink out of the root
    "%2e%2e/%2e%2e/secret.jsonl",  # not decoded: a literal name, outside datasets/
    "..%2fsecret.jsonl",
    "/etc/passwd",
    "~/.bashrc",
    "~root/.bashrc",
    "grpo.db",  # inside the base, outside the allowed root
]


@pytest.mark.parametrize("path", ESCAPES)
def test_every_traversal_form_stays_inside_the_roots(tmp_path: Path, path: str) -> None:
    with pytest.raises(ValueError, match="outside the allowed roots"):
        resolve_local(path, _roots(tmp_path), kind="data")


def test_relative_paths_resolve_against_the_base_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    roots = _roots(tmp_path)
    monkeypatch.chdir(tmp_path / "data" / "datasets")
    inside = resolve_local("datasets/ok.jsonl", roots, kind="data")
    assert inside == roots.base / "datasets/ok.jsonl"
    with pytest.raises(ValueError, match="outside"):
        resolve_local("ok.jsonl", roots, kind="data")  # would exist in the working directory


def test_refusals_do_not_say_whether_the_outside_file_exists(tmp_path: Path) -> None:
    roots = _roots(tmp_path)
    messages = []
    for name in ("secret.jsonl", "no-such-file.jsonl"):
        with pytest.raises(ValueError) as caught:
            resolve_local(f"../{name}", roots, kind="data")
        messages.append(str(caught.value).replace(name, "NAME"))
    assert messages[0] == messages[1]


def test_empty_allowed_roots_allow_nothing_and_none_allows_anything(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="none configured"):
        resolve_local(str(tmp_path), LocalRoots(tmp_path, ()), kind="model")
    anywhere = resolve_local(str(tmp_path), LocalRoots(Path("/"), None), kind="data")
    assert anywhere == tmp_path.resolve()


def test_the_library_rechecks_roots_before_opening_a_dataset(tmp_path: Path) -> None:
    roots = _roots(tmp_path)
    assert load_examples(DataSpec(source="datasets/ok.jsonl"), roots=roots)[0].prompt == "p"
    for path in ("../secret.jsonl", "datasets/out.jsonl", str(tmp_path / "secret.jsonl")):
        with pytest.raises(ValueError, match="outside the allowed roots"):
            load_examples(DataSpec(source=path), roots=roots)


def test_the_library_rechecks_roots_before_loading_a_model(tmp_path: Path) -> None:
    outside = tmp_path / "outside-model"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    roots = LocalRoots(tmp_path / "models", (tmp_path / "models",))
    (tmp_path / "models").mkdir()
    for name in (str(outside), "../outside-model", "file:../outside-model", "./../outside-model"):
        with pytest.raises(ValueError, match="outside the allowed roots"):
            resolve_model_path(name, tmp_path / "cache", progress=False, roots=roots)


def test_a_hub_id_never_reads_a_same_named_directory_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "org" / "name").mkdir(parents=True)
    (tmp_path / "org" / "name" / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # read once, at import
    with pytest.raises(ValueError, match="not in this machine's cache and HF_HUB_OFFLINE is set"):
        resolve_model_path("org/name", tmp_path / "cache", progress=False)
    assert os.path.isdir("org/name")  # what from_pretrained would have loaded
