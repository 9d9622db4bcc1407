"""Secrets at rest: an upstream git URL's credentials are used, never kept in the clone cache; and a
changed proxy password is a new build when the pipeline's KMS key is there (the fingerprint sees
its MAC of it, never the password), and no part of the fingerprint without it.

The upstream repository is served over real HTTP on 127.0.0.1 by `git http-backend` behind a
small server that demands the password (HTTP Basic), so the test shows git got the credentials
and that nothing it or amibuild wrote holds them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from amibuild import render
from amibuild.bake import credential_macs
from amibuild.errors import UpstreamError
from amibuild.pipeline import Overrides, load
from amibuild.render import Target, upstream
from test_fingerprint import BASE_PIPELINE, SOURCE
from test_upstream import DATA, git

USER, PASSWORD = "ci-bot", "S3cretPass"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


class _GitOverHttp(BaseHTTPRequestHandler):
    """git's smart HTTP protocol through `git http-backend` (CGI), for requests with the password."""

    root: Path
    asked: list[str]

    def _serve(self) -> None:
        type(self).asked.append(self.headers.get("Authorization", ""))
        if self.headers.get("Authorization") != f"Basic {TOKEN}":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="upstream"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
               "REMOTE_USER": USER, "REMOTE_ADDR": "127.0.0.1"}
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        done = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, check=True)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        headers = [line.split(":", 1) for line in head.decode().split("\r\n") if ":" in line]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
        self.send_response(status)
        for key, value in headers:
            if key.lower() != "status":
                self.send_header(key, value.strip())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _serve

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """(the repository's URL without credentials, the non-bare origin to add tags in, what each request sent)"""
    origin = tmp_path / "origin"
    shutil.copytree(DATA / "root-layout", origin)
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "v1")
    git(origin, "tag", "v1")
    root = tmp_path / "served"
    root.mkdir()
    git(tmp_path, "clone", "-q", "--bare", str(origin), str(root / "upstream.git"))
    asked: list[str] = []
    handler = type("Handler", (_GitOverHttp,), {"root": root, "asked": asked})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}/upstream.git", origin, asked
    finally:
        server.shutdown()
        server.server_close()


def holding(folder: Path, *secrets: str) -> list[str]:
    """Every file under `folder` holding one of `secrets` (bytes compared: git's packs included)."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path.relative_to(folder)}: {s}" for s in secrets if s.encode() in data]
    return found


@needs_git
def test_an_upstream_url_with_credentials_is_cloned_and_fetched_with_them_and_the_cache_holds_none(
        served, tmp_path: Path) -> None:
    where, origin, asked = served
    url = f"http://{USER}:{PASSWORD}@{where}"
    cache = tmp_path / "cache"
    checkout = upstream.fetch(url, "v1", cache)
    assert git(checkout, "rev-parse", "HEAD") == git(origin, "rev-parse", "v1")
    assert f"Basic {TOKEN}" in asked  # the server was given the password: the clone could not work without it
    # a tag made since the clone: fetched from the remote, with the credentials again
    git(origin, "commit", "-q", "--allow-empty", "-m", "v2")
    git(origin, "push", "-q", str(tmp_path / "served" / "upstream.git"), "HEAD:main", "--tags")
    git(origin, "tag", "v2")
    git(origin, "push", "-q", str(tmp_path / "served" / "upstream.git"), "v2")
    again = upstream.fetch(url, "v2", cache)
    assert git(again, "rev-parse", "HEAD") == git(origin, "rev-parse", "v2")

    assert git(checkout, "config", "--get", "remote.origin.url") == f"http://{where}"
    assert holding(cache, PASSWORD, TOKEN, f"{USER}:") == []
    # the cache folder's name does not come from the secret: the same repository with another password is it
    assert upstream.fetch(f"http://{USER}:0ther{PASSWORD}@{where}", "v1", cache) == checkout


@needs_git
def test_a_clone_an_older_amibuild_kept_with_the_credentials_is_removed_on_the_next_fetch(
        served, tmp_path: Path) -> None:
    where, origin, _ = served
    url = f"http://{USER}:{PASSWORD}@{where}"
    cache = tmp_path / "cache"
    # what amibuild made before this version: the clone under a hash of the credentialed URL, whose
    # remote is that URL (git keeps the password in .git/config)
    old = cache / hashlib.sha256(f"{url}\0v1".encode()).hexdigest()[:16]
    old.mkdir(parents=True)
    git(old, "init", "-q")
    git(old, "remote", "add", "origin", url)
    assert holding(cache, PASSWORD) != []

    checkout = upstream.fetch(url, "v1", cache)
    assert git(checkout, "rev-parse", "HEAD") == git(origin, "rev-parse", "v1")
    assert not old.exists()
    assert holding(cache, PASSWORD, TOKEN, f"{USER}:") == []


@needs_git
def test_a_wrong_upstream_password_is_refused_naming_the_url_masked(served, tmp_path: Path) -> None:
    where, _, _ = served
    with pytest.raises(UpstreamError) as caught:
        upstream.fetch(f"http://{USER}:Wr0ngPass@{where}", "v1", tmp_path / "cache")
    assert f"http://{USER}:***@{where}" in str(caught.value) and "Wr0ngPass" not in str(caught.value)
    assert not (tmp_path / "cache").exists() or holding(tmp_path / "cache", "Wr0ngPass") == []


# ------------------------------------------------------------------------------- the fingerprint


class _Kms:
    """GenerateMac with a key of its own (the pipeline's HMAC key, as the gateway would answer)."""

    def generate_mac(self, key: str, message: bytes, region: str):
        class Answer:
            mac = hmac.new(b"the key nobody holds offline", message, hashlib.sha256).digest()
        return Answer()


def rendered(tmp_path: Path, proxy: str, *, key: bool = True) -> render.Rendered:
    path = tmp_path / "amibuild.hcl"
    path.write_text(BASE_PIPELINE)
    pipeline = load(path, Overrides(variables=(f"http_proxy={proxy}",)))
    build = render.render_build(pipeline, pipeline.variants[0], uses_plugins=False, target=Target(None),
                                sources={r: SOURCE for r in pipeline.regions})
    return render.finish(build, credential_macs.gather(pipeline, [build], _Kms() if key else None).of(build))


def test_a_changed_proxy_password_changes_the_fingerprint_and_no_rendered_file_holds_either(tmp_path: Path) -> None:
    first = rendered(tmp_path, f"http://{USER}:{PASSWORD}@proxy.local:3128")
    again = rendered(tmp_path, f"http://{USER}:{PASSWORD}@proxy.local:3128")
    changed = rendered(tmp_path, f"http://{USER}:N3wPass@proxy.local:3128")
    plain = rendered(tmp_path, "http://proxy.local:3128")
    assert first.fingerprint == again.fingerprint  # same inputs, same build
    assert first.fingerprint != changed.fingerprint  # a new password is a new build: no --force needed
    assert len({first.fingerprint, changed.fingerprint, plain.fingerprint}) == 3
    for one in (first, changed):
        text = "\n".join([*one.files.values(), repr(dict(one.values)), one.fingerprint])
        assert PASSWORD not in text and "N3wPass" not in text
        assert f"http://{USER}:***@proxy.local:3128" in repr(dict(one.values))
    assert first.secret_env["PKR_VAR_http_proxy"] == f"http://{USER}:{PASSWORD}@proxy.local:3128"
    # without the key the password is no part of the fingerprint: the masked URL is
    without = rendered(tmp_path, f"http://{USER}:{PASSWORD}@proxy.local:3128", key=False)
    assert without.fingerprint == rendered(tmp_path, f"http://{USER}:N3wPass@proxy.local:3128", key=False).fingerprint
    assert without.fingerprint not in (first.fingerprint, plain.fingerprint)
