"""Offline proof: every command runs with the network unreachable, in-process and as a subprocess.

Socket connections and name lookups are replaced by functions that record the attempt and
raise, in this process (monkeypatch) and in a child process (a ``sitecustomize`` module put
first on its PYTHONPATH). Each command must succeed and nothing may have tried the network,
even an attempt whose error was caught and ignored.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli import main

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
PACK = ROOT / "rules" / "kyc.yaml"

#: The socket entry points replaced, as (object, attribute name).
BLOCKED = [
    (socket.socket, "connect"),
    (socket.socket, "connect_ex"),
    (socket.socket, "sendto"),
    (socket, "create_connection"),
    (socket, "getaddrinfo"),
    (socket, "gethostbyname"),
]

SITECUSTOMIZE = textwrap.dedent(
    '''
    """Refuse every network access of this process and record it (agenttrace offline test)."""
    import os
    import socket

    _LOG = os.environ["AGENTTRACE_NETWORK_LOG"]


    def _refuse(name):
        def refuse(*args, **kwargs):
            with open(_LOG, "a", encoding="utf-8") as fh:
                fh.write(f"{name} {args[-1]!r}\\n")
            raise OSError(f"network blocked by the offline test: {name}")

        return refuse


    for owner, attr in [
        (socket.socket, "connect"),
        (socket.socket, "connect_ex"),
        (socket.socket, "sendto"),
        (socket, "create_connection"),
        (socket, "getaddrinfo"),
        (socket, "gethostbyname"),
    ]:
        setattr(owner, attr, _refuse(f"{getattr(owner, '__name__', owner)}.{attr}"))
    '''
)


@pytest.fixture
def offline(monkeypatch) -> list[str]:
    """Block the network in this process; the returned list collects every attempt."""
    attempts: list[str] = []

    def refuse(name: str):
        def refused(*args, **kwargs):
            attempts.append(f"{name} {args[-1]!r}" if args else name)
            raise OSError(f"network blocked by the offline test: {name}")

        return refused

    for owner, attr in BLOCKED:
        monkeypatch.setattr(owner, attr, refuse(f"{owner.__name__}.{attr}"))
    return attempts


def test_the_blocking_is_in_force(offline: list[str]):
    with pytest.raises(OSError, match="blocked"):
        socket.create_connection(("example.com", 443), timeout=1)
    with pytest.raises(OSError, match="blocked"):
        socket.getaddrinfo("example.com", 443)
    assert offline == ["socket.create_connection ('example.com', 443)", "socket.getaddrinfo 443"]


def _run_in_process(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.stdout


def _run_id(runs_jsonl: str) -> str:
    rows = [json.loads(line) for line in runs_jsonl.splitlines() if line.strip()]
    assert len(rows) >= 10
    return rows[0]["run_id"]


def _commands(out: Path) -> list[list[str]]:
    return [
        ["report", str(SAMPLES), "--out", str(out / "report")],
        ["runs", str(SAMPLES), "--format", "jsonl"],
        ["rules", "check", str(PACK)],
    ]


def _check_report(out: Path, runs_jsonl: str) -> None:
    ingest = json.loads((out / "report" / "summary.json").read_text(encoding="utf-8"))["ingest"]
    assert ingest["spans_read"] == (
        ingest["spans_kept"] + ingest["duplicate_spans"] + ingest["spans_quarantined"]
    )
    assert ingest["spans_kept"] > 0
    assert ingest["runs"] == len(runs_jsonl.splitlines())
    assert (out / "report" / "manifest.json").is_file()


def test_every_command_runs_offline_in_process(tmp_path: Path, offline: list[str]):
    outputs = {}
    for args in _commands(tmp_path):
        code, stdout = _run_in_process(args)
        assert code == 0, (args, stdout)
        outputs[args[0]] = stdout
    run_id = _run_id(outputs["runs"])
    code, stdout = _run_in_process(["show", run_id, str(SAMPLES)])
    assert code == 0 and stdout.startswith(f"run      {run_id}\n")
    _check_report(tmp_path, outputs["runs"])
    assert offline == []


def _run_subprocess(args: list[str], site: Path, log: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), str(ROOT), env.get("PYTHONPATH")) if p
    )
    env["AGENTTRACE_NETWORK_LOG"] = str(log)
    return subprocess.run(
        [sys.executable, "-c", "from analyzer.cli import main; main()", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder


def test_the_subprocess_blocking_is_in_force(tmp_path: Path, site: Path):
    log = tmp_path / "network.log"
    probe = "import socket; socket.create_connection(('example.com', 443), timeout=1)"
    env = dict(os.environ, PYTHONPATH=str(site), AGENTTRACE_NETWORK_LOG=str(log))
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    assert "OSError: network blocked by the offline test: socket.create_connection" in (
        result.stderr
    )
    assert log.read_text(encoding="utf-8") == "socket.create_connection ('example.com', 443)\n"


def test_every_command_runs_offline_as_a_subprocess(tmp_path: Path, site: Path):
    log = tmp_path / "network.log"
    outputs = {}
    for args in _commands(tmp_path):
        result = _run_subprocess(args, site, log)
        assert result.returncode == 0, (args, result.stderr[-2000:])
        outputs[args[0]] = result.stdout
    run_id = _run_id(outputs["runs"])
    result = _run_subprocess(["show", run_id, str(SAMPLES)], site, log)
    assert result.returncode == 0 and result.stdout.startswith(f"run      {run_id}\n")
    _check_report(tmp_path, outputs["runs"])
    assert not log.exists(), log.read_text(encoding="utf-8")
    # the child printed what this process prints for the same command
    assert outputs["runs"] == _run_in_process(["runs", str(SAMPLES), "--format", "jsonl"])[1]
