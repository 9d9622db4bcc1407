"""An endpoint that answers with something that is not AWS's answer is one line, never a traceback.

A real HTTP server on 127.0.0.1 stands in for an emulator or proxy in trouble: it answers every
request with an HTML 500 page (what the emulator gave for a region it did not know), or with a
200 whose body is not XML. Through the real CLI: `rollout` and `aws-auth` (CloudFormation,
XML: botocore raises ResponseParserError, which is not a BotoCoreError) and `history` (SSM, JSON:
a ClientError whose "code" is 500 and whose message is the page). Each ends with exit 1 and one
`amibuild: error:` line naming the call.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from conftest import CliResult, run_cli

ROOT = Path(__file__).resolve().parent.parent
HTML = b"<!doctype html>\n<html><head><title>500 Internal Server Error</title></head><body><h1>Oops</h1></body></html>\n"


class _Answers(BaseHTTPRequestHandler):
    status = 500
    body = HTML
    content_type = "text/html"

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(self.status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _serve(status: int, body: bytes, content_type: str) -> Iterator[str]:
    handler = type("Handler", (_Answers,), {"status": status, "body": body, "content_type": content_type})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def html_500() -> Iterator[str]:
    yield from _serve(500, HTML, "text/html")


@pytest.fixture
def garbage_200() -> Iterator[str]:
    yield from _serve(200, b"\x00\x01not a response at all", "application/octet-stream")


def invoke(workdir: Path, endpoint: str, *args: str) -> CliResult:
    """The command line (conftest.run_cli) against `endpoint` with dummy credentials."""
    return run_cli(workdir, *args, env={"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-west-2"})


COMMANDS = [
    ("rollout", ["rollout", "--stack", "ng"], "cloudformation"),
    ("aws-auth", ["aws-auth", "--stack", "ng"], "cloudformation"),
    ("history", ["history", "--variant", "v"], "ssm"),
]


def _workdir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text('pipeline {\n  name = "t"\n  regions = ["us-west-2"]\n}\n\nvariant "v" {\n}\n')
    return tmp_path


@pytest.mark.parametrize("args,service", [c[1:] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
def test_an_html_500_is_one_line_exit_1(tmp_path: Path, html_500: str, args: list[str], service: str) -> None:
    result = invoke(_workdir(tmp_path), html_500, *args)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"amibuild: error: {service}:")
    assert "HTTP 500" in lines[0] or "not an AWS response" in lines[0]
    assert "doctype" not in lines[0].lower()


# SSM's JSON protocol reads an unparsable 200 as an empty answer (botocore's choice), so only the
# XML services are asked here
@pytest.mark.parametrize("args,service", [c[1:] for c in COMMANDS[:2]], ids=[c[0] for c in COMMANDS[:2]])
def test_an_answer_botocore_cannot_parse_is_one_line_exit_1(tmp_path: Path, garbage_200: str, args: list[str],
                                                            service: str) -> None:
    result = invoke(_workdir(tmp_path), garbage_200, *args)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"amibuild: error: {service}:")
