"""Fixtures for the whole suite: an isolated environment for every test, and the local emulator.

Every test runs without AWS settings or credentials from the machine, with instance metadata
disabled and a tripwire proxy (anything not on loopback fails at once). Tests that need AWS ask
for `sandbox`: one emulator per session, reset before each test, its env() applied.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

# The package is not installed in the test venv: import it from this checkout.
_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from amibuild.sandbox import Sandbox, safety_env  # noqa: E402

_PROXY_VARS = {"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY"}


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS variables, config files or proxies from the machine; the safety env instead."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name.upper() in _PROXY_VARS:
            monkeypatch.delenv(name)
    missing = tmp_path / "no-aws-config"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(missing / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(missing / "credentials"))
    for name, value in safety_env().items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="session")
def sandbox_server() -> Iterator[Sandbox]:
    """One emulator for the whole session; use `sandbox` in tests."""
    with Sandbox() as server:
        yield server


@pytest.fixture
def sandbox(
    sandbox_server: Sandbox, isolated_env: None, monkeypatch: pytest.MonkeyPatch
) -> Sandbox:
    """The session's emulator, reset to its seed, with its env() applied to os.environ."""
    sandbox_server.reset()
    for name, value in sandbox_server.env().items():
        monkeypatch.setenv(name, value)
    return sandbox_server
