"""Repository trust (issue 29): plain http is refused unless the key is shipped or insecure is said."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from amibuild.errors import SpecError
from amibuild.pipeline import Overrides, load
from amibuild.render.variables import template_variables
from conftest import run_cli

KEY = ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGRzZXJ2ZWQ=\n=AbCd\n"
       "-----END PGP PUBLIC KEY BLOCK-----\n")
BASE = """\
pipeline {
  name    = "t"
  regions = ["us-west-2"]
}

variant "v" {
  extra_packages = ["htop"]
  repo "mirror" {
REPO
  }
}
"""


def loaded(tmp_path: Path, repo: str, overrides: Overrides = Overrides()):
    return load_pipeline(tmp_path, repo, overrides).variants[0]


def load_pipeline(tmp_path: Path, repo: str, overrides: Overrides = Overrides()):
    path = tmp_path / "amibuild.hcl"
    path.write_text(BASE.replace("REPO", repo))
    return load(path, overrides)


def record(tmp_path: Path, repo: str) -> str:
    pipeline = load_pipeline(tmp_path, repo)
    (found,) = [v for v in template_variables(pipeline.variants[0], pipeline) if v.name == "extra_repos"]
    (line,) = found.default
    return line


def test_http_baseurl_with_http_gpgkey_is_refused_naming_the_repository(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"repo 'mirror': baseurl and gpgkey are plain http://, so whoever is on "
                                        r"the network path can swap the packages and the key"):
        loaded(tmp_path, '    baseurl = "http://mirror.local/el9"\n    gpgkey = "http://mirror.local/KEY"')


def test_the_cli_refuses_it_with_exit_2_and_one_line(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(BASE.replace("REPO", '    baseurl = "http://mirror.local/el9"\n'
                                                                '    gpgkey = "http://mirror.local/KEY"'))
    result = run_cli(tmp_path, "render")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("amibuild: error: amibuild.hcl") and "repo 'mirror'" in line
    assert not (tmp_path / "build").exists()


def test_https_baseurl_with_an_http_key_is_refused_too(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"repo 'mirror': gpgkey is plain http://"):
        loaded(tmp_path, '    baseurl = "https://mirror.local/el9"\n    gpgkey = "http://mirror.local/KEY"')


def test_insecure_true_says_plain_http_is_meant(tmp_path: Path) -> None:
    repo = '    baseurl = "http://mirror.local/el9"\n    gpgkey = "http://mirror.local/KEY"\n    insecure = true'
    assert loaded(tmp_path, repo).repos[0].insecure
    assert record(tmp_path, repo) == "mirror|http://mirror.local/el9|http://mirror.local/KEY"


def test_a_local_key_file_makes_an_http_mirror_acceptable_and_travels_with_the_build(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "mirror.asc").write_text(KEY)
    repo = '    baseurl = "http://mirror.local/el9"\n    gpgkey = "keys/mirror.asc"'
    assert loaded(tmp_path, repo).repos[0].gpgkey_text == KEY
    assert record(tmp_path, repo) == "mirror|http://mirror.local/el9|key:" + base64.b64encode(KEY.encode()).decode()


def test_an_inline_key_does_too(tmp_path: Path) -> None:
    repo = f'    baseurl = "http://mirror.local/el9"\n    gpgkey = <<EOT\n{KEY}EOT'
    variant = loaded(tmp_path, repo)
    assert variant.repos[0].gpgkey_text == KEY and "|key:" in record(tmp_path, repo)
    assert "BEGIN PGP" not in repr(variant.repos[0])


def test_extra_repo_takes_a_local_key_file_and_insecure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mirror.asc").write_text(KEY)
    monkeypatch.chdir(tmp_path)
    shipped = loaded(tmp_path, '    baseurl = "https://a.example/el9"\n    gpgcheck = false',
                     Overrides(extra_repos=("local=http://mirror.local/el9|mirror.asc",)))
    assert shipped.repos[-1].gpgkey_text == KEY
    said = loaded(tmp_path, '    baseurl = "https://a.example/el9"\n    gpgcheck = false',
                  Overrides(extra_repos=("local=http://mirror.local/el9|http://mirror.local/KEY|insecure=true",)))
    assert said.repos[-1].insecure and said.repos[-1].gpgkey == "http://mirror.local/KEY"


def test_a_binary_or_foreign_key_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "key.gpg").write_bytes(b"\x99\x01\x0d\x04binary")
    with pytest.raises(SpecError, match=r"repo 'mirror' gpgkey key.gpg is not one ASCII-armored public key"):
        loaded(tmp_path, '    baseurl = "http://mirror.local/el9"\n    gpgkey = "key.gpg"')


def test_unsigned_over_http_stays_refused_even_with_insecure(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="plain http:// baseurl without a gpgkey"):
        loaded(tmp_path, '    baseurl = "http://mirror.local/el9"\n    gpgcheck = false\n    insecure = true')
