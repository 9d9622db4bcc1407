"""decode-userdata's caps (issue 29): input read, bytes decoded over every layer, nesting."""

from __future__ import annotations

import base64
import gzip
import io
from pathlib import Path

import pytest

from amibuild.errors import NotUserData, UserDataTooBig
from amibuild.handoff.userdata import decode as ud
from tests.conftest import run_cli

MiB = 1 << 20


class CountingStream(io.RawIOBase):
    """A binary stream of `size` bytes that counts what was read from it."""

    def __init__(self, size: int, byte: bytes = b"A") -> None:
        self.size, self.byte, self.read_bytes = size, byte, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.read_bytes if n < 0 else min(n, self.size - self.read_bytes)
        self.read_bytes += n
        return self.byte * n


def nested_mime(depth: int) -> bytes:
    head = "".join(f'Content-Type: multipart/mixed; boundary="b{i}"\nMIME-Version: 1.0\n\n--b{i}\n'
                   for i in range(depth))
    tail = "".join(f"--b{i}--\n" for i in reversed(range(depth)))
    return (head + "Content-Type: text/x-shellscript\n\n#!/bin/sh\necho hi\n" + tail).encode()


def test_reading_50_mb_stops_one_byte_past_the_cap() -> None:
    stream = CountingStream(50 * 1000 * 1000)
    with pytest.raises(UserDataTooBig, match=r"^<stdin>: not read: more than 1 MiB \(the limit"):
        ud.read_limited(stream, "<stdin>")
    assert stream.read_bytes == MiB + 1


def test_reading_at_the_cap_reads_it_all() -> None:
    stream = CountingStream(MiB)
    assert len(ud.read_limited(stream, "<stdin>")) == MiB and stream.read_bytes == MiB


def test_decode_userdata_refuses_a_50_mb_file_with_exit_2_naming_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    with big.open("wb") as out:
        out.truncate(50 * 1000 * 1000)  # sparse: 50 MB without writing them
    result = run_cli(tmp_path, "decode-userdata", "big.txt")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "amibuild: error: big.txt: not read: more than 1 MiB (the limit; user data is at most 16 KB on EC2, "
        "a template body at most 1 MB) (--max-bytes to raise it)"]


def test_max_bytes_raises_the_cap(tmp_path: Path) -> None:
    script = b"#!/bin/sh\n" + b"# padding\n" * 200_000  # 2 MB
    (tmp_path / "big.sh").write_bytes(script)
    assert run_cli(tmp_path, "decode-userdata", "big.sh").returncode == 2
    result = run_cli(tmp_path, "decode-userdata", "big.sh", "--max-bytes", str(3 * MiB))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("--- part 1/1: text/x-shellscript ---")


def test_2000_deep_mime_is_refused_before_the_parser_goes_deeper_than_32() -> None:
    budget = ud.Budget()
    with pytest.raises(UserDataTooBig, match=r"^<input>: not decoded: MIME parts nested more than 32 deep"):
        ud.decode(nested_mime(2000), budget=budget)
    assert budget.deepest == 33  # the level that broke the limit was seen, none beyond it


def test_decode_userdata_refuses_2000_deep_mime_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "deep.txt").write_bytes(nested_mime(2000))
    result = run_cli(tmp_path, "decode-userdata", "deep.txt")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "amibuild: error: deep.txt: not decoded: MIME parts nested more than 32 deep (the limit)"]
    assert "Traceback" not in result.stderr


def test_32_deep_mime_still_decodes() -> None:
    budget = ud.Budget()
    (part,) = ud.decode(nested_mime(32), budget=budget)
    assert part.content_type == "text/x-shellscript" and part.depth == 31 and budget.deepest == 32


def test_mime_nested_through_message_rfc822_parts_counts_each_level() -> None:
    inner = b"Content-Type: text/x-shellscript\n\n#!/bin/sh\necho\n"
    for _ in range(40):
        inner = b"Content-Type: message/rfc822\nMIME-Version: 1.0\n\n" + inner
    budget = ud.Budget()
    with pytest.raises(UserDataTooBig, match="nested more than 32 deep"):
        ud.decode(inner, budget=budget)
    assert budget.deepest == 33


def test_gzip_bomb_stops_inflating_at_the_budget() -> None:
    bomb = gzip.compress(b"#!/bin/sh\n" + b"\0" * (200 * MiB), mtime=0)  # ~200 KB that inflates to 200 MiB
    assert len(bomb) < MiB
    budget = ud.Budget()
    with pytest.raises(UserDataTooBig, match=r"gzip data takes the bytes decoded over all layers beyond the limit "
                                             r"of 1 MiB"):
        ud.decode(base64.b64encode(bomb), budget=budget)
    assert budget.decoded <= 2 * MiB + 1  # the base64 layer and at most the cap + 1 of inflated data


def test_every_layer_counts_against_one_budget() -> None:
    """A script that fits the cap, wrapped in base64 three times: the layers together go beyond it."""
    data = b"#!/bin/sh\n" + b"x" * 300_000
    for _ in range(3):
        data = base64.b64encode(data)
    assert len(data) < MiB
    with pytest.raises(UserDataTooBig, match="base64 takes the bytes decoded over all layers"):
        ud.decode(data)
    assert ud.decode(data, budget=ud.Budget(4 * MiB))[0].content_type == "text/x-shellscript"


def test_write_files_gzip_bomb_is_stopped_too() -> None:
    bomb = base64.b64encode(gzip.compress(b"\0" * (64 * MiB), mtime=0)).decode()
    config = f"#cloud-config\nwrite_files:\n- path: /x\n  encoding: gz+b64\n  content: {bomb}\n".encode()
    with pytest.raises(UserDataTooBig, match="write_files /x: gzip data takes the bytes decoded"):
        ud.decode(config)


def test_deep_json_and_yaml_are_refused_not_a_recursion_error() -> None:
    for data in (b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
                 b"#cloud-config\n" + "".join(" " * i + "a:\n" for i in range(300)).encode(),
                 b"Resources:\n" + "".join(" " * i + "a:\n" for i in range(1, 300)).encode()):
        budget = ud.Budget()
        with pytest.raises(UserDataTooBig, match="YAML/JSON collections nested more than 32 deep"):
            ud.decode(data, budget=budget)
        assert budget.deepest == 33


def test_template_aliases_are_refused() -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
    with pytest.raises(NotUserData, match=r"a YAML alias \(\*a\): user data documents take none"):
        ud.decode((laughs + "UserData: hi\n").encode())


def test_a_reference_repeated_is_charged_each_time() -> None:
    template = '{"UserData": {"Fn::Sub": "#!/bin/sh\\n' + "${P}" * 10_000 + '"}}'
    with pytest.raises(UserDataTooBig, match="reference P takes the bytes decoded"):
        ud.decode(template.encode(), references={"P": "x" * 4096})


def test_max_bytes_must_be_positive(tmp_path: Path) -> None:
    (tmp_path / "ud.sh").write_text("#!/bin/sh\n")
    result = run_cli(tmp_path, "decode-userdata", "ud.sh", "--max-bytes", "-1")
    assert result.returncode == 2 and "--max-bytes -1: a number of bytes, 1 or more" in result.stderr
