"""The state contract (checkers/state-contract.schema.json) holds what is
produced: every state's facts a user checker gets, by a command's
CRASHLAB_STATE_JSON or a persistent checker's request, for states of
several strategies, validate against the schema, which allows no key it
does not describe; its version is the code's."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support import ROOT, Recordings, crashlab

from harness.check.usercheck import STATE_CONTRACT_VERSION
from harness.rundir import RunDir

SCHEMA_PATH = ROOT / "checkers" / "state-contract.schema.json"
# Two transactions with payloads, the first one's directory sync missing:
# states of every kind have marks before and within their cut.
WORKLOAD = """set -e
echo setup-done >> "$CRASHLAB_MARK"
for i in 1 2; do
  echo "txn-begin:$i;value=$i" >> "$CRASHLAB_MARK"
  printf '%s\\n' "$i" > counter.tmp
  sync counter.tmp
  mv counter.tmp counter
  [ "$i" = 1 ] || sync .
  echo "txn-ack:$i;value=$i;who=a=b" >> "$CRASHLAB_MARK"
done
"""
# A persistent checker that keeps each request's state (its first argument:
# the folder) and holds.
SERVER = """import json, pathlib, sys, uuid
out = pathlib.Path(sys.argv[1])
for line in sys.stdin:
    state = json.loads(line)["state"]
    (out / uuid.uuid4().hex).write_text(json.dumps(state))
    print(json.dumps({"verdict": "pass", "explanation": ""}), flush=True)
"""
# reorder, torn: a budget's sample (the prefixes and kept sets of every
# epoch) has states of each kind; every state of the run adds none
BUDGET = ["--budget", "40"]
STRATEGIES = {
    "prefix": ["--strategy", "prefix"],
    "reorder": ["--strategy", "reorder", *BUDGET],
    "torn": ["--strategy", "torn", "--max-tears", "2", *BUDGET],
    "fault": ["--strategy", "prefix", "--fault", "lost-flush"],
}


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@functools.cache
def validator() -> jsonschema.Draft202012Validator:
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


def problems(facts: dict[str, Any]) -> list[str]:
    """What the schema finds wrong with one state's facts."""
    return [e.message for e in validator().iter_errors(facts)]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    tmp = tmp_path_factory.mktemp("contract")
    (tmp / "w.sh").write_text(WORKLOAD)
    p = crashlab(
        "record", "--backend", "fuse", "--out", str(tmp / "run"), "--", "sh", str(tmp / "w.sh")
    )
    assert p.returncode == 0, p.stderr
    return RunDir(tmp / "run")


def _dumped(run: RunDir, out: Path, flags: list[str], spec: str) -> list[dict[str, Any]]:
    """The facts of every state ``crashlab check`` gave ``spec`` (a checker
    that copies them into ``dumps`` beside ``out``)."""
    p = crashlab(
        "check", str(run.path), *flags, "-j", "2", "--no-triage", "--out", str(out),
        "--checker", spec,
    )  # fmt: skip
    assert p.returncode in (0, 1), p.stderr
    checked = json.loads((out / "result.json").read_text())["states"]["checked"]
    facts = [json.loads(f.read_text()) for f in sorted((out.parent / "dumps").iterdir())]
    assert len(facts) >= checked > 0  # the first state is judged once more, before the fan-out
    return facts


@pytest.mark.needs_fuse
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_a_commands_state_json_matches_the_schema(
    run: RunDir, tmp_path: Path, strategy: str
) -> None:
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    spec = f'dump=cp "$CRASHLAB_STATE_JSON" "$(mktemp -p {dumps})"'
    facts = _dumped(run, tmp_path / "out", STRATEGIES[strategy], spec)
    assert {s["state"]: problems(s) for s in facts if problems(s)} == {}
    assert any(m["payload"] == {"value": "2", "who": "a=b"} for s in facts for m in _marks(s))


@pytest.mark.needs_fuse
def test_a_persistent_checkers_request_state_matches_the_schema(
    run: RunDir, tmp_path: Path
) -> None:
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    (tmp_path / "serve.py").write_text(SERVER)
    spec = f"dump=persist:{sys.executable} {tmp_path / 'serve.py'} {dumps}"
    facts = _dumped(run, tmp_path / "out", STRATEGIES["reorder"], spec)
    assert {s["state"]: problems(s) for s in facts if problems(s)} == {}


@pytest.mark.needs_fuse
def test_a_multicrash_states_json_matches_the_schema(recorded: Recordings, tmp_path: Path) -> None:
    """Composite states (a crash during recovery from a crash) of a built-in
    SUT's run, its own checker beside the user's."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    run = recorded.copy(tmp_path / "run", "sqlite-wal-full", "insert:txns=3,ops=1,tables=1,seed=1")
    spec = f'dump=cp "$CRASHLAB_STATE_JSON" "$(mktemp -p {dumps})"'
    flags = ["--strategy", "multicrash", "--max-first", "2", "--then", "prefix"]
    facts = _dumped(run, tmp_path / "out", flags, spec)
    assert {s["state"]: problems(s) for s in facts if problems(s)} == {}
    assert any(s["acked"] > 0 for s in facts)


# A checker reading the state's recovered image (debugfs, read-only): the
# counter there is the counter of its copy of the files, and the image's
# last 4 KiB (free space) are not the writer's.
READER = """import json, os, subprocess, sys
img = json.load(open(os.environ["CRASHLAB_STATE_JSON"]))["image"]
mine = os.path.join(os.environ["CRASHLAB_FILES"], "counter")
got = subprocess.run(["debugfs", "-R", "cat /counter", img], capture_output=True).stdout
want = open(mine, "rb").read() if os.path.exists(mine) else b""
with open(img, "rb") as f:
    f.seek(-4096, 2)
    tail = f.read()
print(f"image {got!r}, files {want!r}, tail {tail[:8]!r}")
sys.exit(0 if got == want and b"WRITTEN" not in tail else 1)
"""
# A checker that, on its third call, writes the recovered image's last 4 KiB.
WRITER = """import json, os, sys
n = len(os.listdir(sys.argv[1]))
open(os.path.join(sys.argv[1], str(n)), "w").close()
if n == 2:
    with open(json.load(open(os.environ["CRASHLAB_STATE_JSON"]))["image"], "r+b") as f:
        f.seek(-4096, 2)
        f.write(b"WRITTEN" * 512)
"""


@pytest.mark.needs_fuse
def test_the_image_is_the_recovered_one_and_read_only(run: RunDir, tmp_path: Path) -> None:
    """``image`` is the state's recovered ext4 (its files are the copy's);
    a checker that writes it gets a checker error for that state, and the
    states after it a fresh image (the reader still holds on each)."""
    (tmp_path / "reader.py").write_text(READER)
    (tmp_path / "writer.py").write_text(WRITER)
    (tmp_path / "calls").mkdir()
    p = crashlab(
        "check", str(run.path), "--strategy", "prefix", "-j", "1", "--no-triage",
        "--max-states", "6", "--out", str(tmp_path / "out"),
        "--checker", f"read={sys.executable} {tmp_path / 'reader.py'}",
        "--checker", f"write={sys.executable} {tmp_path / 'writer.py'} {tmp_path / 'calls'}",
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    lines = [json.loads(ln) for ln in (tmp_path / "out" / "states.jsonl").read_text().splitlines()]
    assert len(lines) > 3 and all(s["v"]["USER:read"] == "pass" for s in lines), lines
    errors = [s["error"]["USER:write"] for s in lines if s["v"]["USER:write"] == "error"]
    assert len(errors) == 1 and "changed the recovered image" in errors[0], errors


def _marks(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return facts["marks"]["before"] + facts["marks"]["maybe"]


SAMPLE = {
    "run": "/r",
    "state": "p-3",
    "acked": 1,
    "begun": 2,
    "cut": [5, 9],
    "marks": {
        "before": [
            {"entry": 1, "label": "txn-ack:1;v=1", "name": "txn-ack:1", "payload": {"v": "1"}}
        ],
        "maybe": [],
    },
    "meta": {"command": ["sh"], "anything": {"the": "workload's"}},
    "image": "/w/scratch.img",
}


def test_the_schema_refuses_keys_it_does_not_describe_and_missing_ones() -> None:
    assert problems(SAMPLE) == []
    assert problems({**SAMPLE, "extra": 1}) != []  # additionalProperties false
    for key in SAMPLE:
        assert problems({k: v for k, v in SAMPLE.items() if k != key}) != [], key
    mark = SAMPLE["marks"]["before"][0]  # type: ignore[index]  # SAMPLE is a dict of JSON values
    for bad in ({**mark, "x": 1}, {k: v for k, v in mark.items() if k != "payload"}):
        assert problems({**SAMPLE, "marks": {"before": [bad], "maybe": []}}) != []
    assert problems({**SAMPLE, "marks": {"before": [], "maybe": [], "after": []}}) != []
    assert problems({**SAMPLE, "acked": "1"}) != [] and problems({**SAMPLE, "cut": [1]}) != []
    assert problems({**SAMPLE, "image": None}) == [] and problems({**SAMPLE, "image": 1}) != []


def test_the_schema_describes_every_key_and_its_version_is_the_codes() -> None:
    s = schema()
    assert s["$id"] == f"urn:crashlab:state-contract:{STATE_CONTRACT_VERSION}"
    assert f"version {STATE_CONTRACT_VERSION}" in s["title"]

    def described(node: dict[str, Any]) -> list[str]:
        missing = [k for k, v in node.get("properties", {}).items() if not v.get("description")]
        return missing + [m for v in node.get("properties", {}).values() for m in described(v)]

    assert described(s) == [] and described(s["$defs"]["mark"]) == []
    assert set(s["required"]) == set(s["properties"])
