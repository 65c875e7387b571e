"""A live Hermes on a real nats-server for the client's tests, and a check of every envelope
on the wire against the JSON Schema committed under `schema/`.

Needs the `hermes` binary (`HERMES_BIN`, else `target/debug/hermes` of the repository) and
`nats-server` (`HERMES_NATS_SERVER`, else `.tools/venv/bin`, else on PATH); `scripts/setup-test-deps.sh` installs
nats-server, pytest and jsonschema into `.tools/venv`."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import time

import jsonschema
import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
SCHEMA = REPO / "schema"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} within {timeout} s")


class Schemas:
    """Validators of `schema/<kind>.json`, and what they checked."""

    def __init__(self):
        self.validators = {}
        self.checked = []

    def validate(self, direction: str, subject: str, envelope: dict) -> None:
        kind = envelope.get("kind")
        path = SCHEMA / f"{kind}.json"
        assert path.exists(), f"{direction} on {subject}: no schema for kind {kind!r}"
        if kind not in self.validators:
            schema = json.loads(path.read_text())
            self.validators[kind] = jsonschema.Draft202012Validator(schema)
        errors = sorted(self.validators[kind].iter_errors(envelope), key=str)
        assert not errors, (f"{direction} {kind} on {subject} does not match "
                            f"schema/{kind}.json: {errors[0].message}\n{envelope}")
        self.checked.append((direction, kind))


@pytest.fixture(scope="session")
def hermes_bin() -> str:
    path = os.environ.get("HERMES_BIN") or str(REPO / "target" / "debug" / "hermes")
    if not pathlib.Path(path).exists():
        pytest.fail(f"no hermes binary at {path}: run `cargo build` or set HERMES_BIN")
    return path


@pytest.fixture(scope="session")
def deployment(tmp_path_factory, hermes_bin):
    """nats-server -js and `hermes serve --actors all` on it: yields the NATS URL."""
    local = REPO / ".tools" / "venv" / "bin" / "nats-server"
    nats_server = (os.environ.get("HERMES_NATS_SERVER")
                   or (str(local) if local.exists() else shutil.which("nats-server")))
    if not nats_server:
        pytest.fail("nats-server not found: run scripts/setup-test-deps.sh, "
                    "or set HERMES_NATS_SERVER")
    work = tmp_path_factory.mktemp("hermes")
    port = free_port()
    nats = subprocess.Popen([nats_server, "-js", "-a", "127.0.0.1", "-p", str(port),
                             "-sd", str(work / "nats")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"nats://127.0.0.1:{port}"

    def listening():
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, 30, "nats-server did not listen")
    config = work / "hermes.toml"
    config.write_text((HERE / "hermes.toml.in").read_text()
                      .replace("@SCENARIO@", str(HERE / "scenario.toml"))
                      .replace("@DATA@", str(work / "data")))
    ready = work / "ready"
    log = open(work / "serve.log", "w")
    env = {**os.environ, "HERMES_LOG": "warn"}
    for var in ("HERMES_CONFIG", "HERMES_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(var, None)
    serve = subprocess.Popen([hermes_bin, "--config", str(config), "serve", "--bus", url,
                              "--ready-file", str(ready)],
                             stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(lambda: ready.exists() or serve.poll() is not None, 180,
                 "hermes serve did not become ready")
        if serve.poll() is not None:
            raise RuntimeError(f"hermes serve exited: {(work / 'serve.log').read_text()}")
        yield url
    finally:
        serve.terminate()
        try:
            serve.wait(20)
        except subprocess.TimeoutExpired:
            serve.kill()
        nats.terminate()
        nats.wait(10)
        log.close()


@pytest.fixture
def schemas() -> Schemas:
    return Schemas()
