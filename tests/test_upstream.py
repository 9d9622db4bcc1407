"""amibuild.render.upstream: upstream-shaped JSON templates in both layouts -> HCL2 that Packer accepts.

The fixture trees under tests/data/upstream/ are written for these tests in the shape of the two
layouts awslabs/amazon-eks-ami has had; they are not upstream files. They stay for what the real
snapshots (tests/test_upstream_real.py) cannot show: a builder with access_key/secret_key, only/
except, env outside a default, undeclared variables, literal "$" next to references, the
insert-point fallbacks, broken JSON, and git fetching.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from amibuild import hcl
from amibuild.render import upstream
from amibuild.errors import UpstreamError

DATA = Path(__file__).parent / "data" / "upstream"
LAYOUTS = {"root-layout": "root", "templates-layout": "templates"}
REQUIRED = {
    "ami_name": "eks-test-node",
    "kubernetes_version": "1.29",
    "kubernetes_build_date": "2024-01-01",
}
CREDENTIALS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
PACKER = shutil.which("packer")
needs_packer = pytest.mark.skipif(PACKER is None, reason="no packer binary on PATH")
OURS = "echo amibuild-was-here"


def ours() -> hcl.Block:
    return hcl.Block("provisioner", ("shell",), [hcl.Attr("inline", [OURS])])


def provisioners(text: str) -> list[tuple[str, dict]]:
    """(type, settings) of each provisioner in the build, in order."""
    build = hcl.loads(text)["build"][0]
    return [next(iter(p.items())) for p in build.get("provisioner", [])]


def declared(text: str) -> dict[str, dict]:
    """variable name -> its settings."""
    return {name: body for v in hcl.loads(text)["variable"] for name, body in v.items()}


def script_index(provs: list[tuple[str, dict]], needle: str) -> int:
    return next(i for i, (_, p) in enumerate(provs) if needle in str(p.get("script", "")))


def packer(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PACKER, *args], cwd=cwd, capture_output=True, text=True, check=False,
        # the isolated_env fixture's safety settings, no update checks, no ~/.packer.d
        env={**os.environ, "HOME": str(cwd), "CHECKPOINT_DISABLE": "1"},
    )


def validate(path: Path, **extra: str) -> subprocess.CompletedProcess:
    variables = {**REQUIRED, **extra}
    flags = [f"-var={k}={v}" for k, v in variables.items()]
    return packer(["validate", *flags, path.name], path.parent)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "upstream.pkr.hcl"
    path.write_text(text)
    return path


def copy_fixture(tmp_path: Path, name: str = "root-layout") -> Path:
    root = tmp_path / name
    shutil.copytree(DATA / name, root)
    return root


def edit_template(root: Path, change) -> None:
    path = root / "eks-worker-al2.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


# ------------------------------------------------------------------------------------ loading


@pytest.mark.parametrize("fixture", LAYOUTS)
def test_credential_variables_are_dropped_and_their_env_entries_stay_empty(fixture: str) -> None:
    t = upstream.load(DATA / fixture)
    text = upstream.hcl_document(t)

    assert t.dropped == CREDENTIALS
    assert not set(CREDENTIALS) & set(t.variables)
    for word in (*CREDENTIALS, "access_key", "secret_key"):
        assert word not in text
    # upstream's scripts run with `set -o nounset`: the names stay, with no value
    _, install = provisioners(text)[script_index(provisioners(text), "install-worker")]
    env = install["environment_vars"]
    assert {"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN="} <= set(env)
    assert not [e for e in env if e.startswith("AWS_") and not e.endswith("=")]
    assert "KUBERNETES_VERSION=${var.kubernetes_version}" in env


def test_insert_point_falls_back_to_before_cleanup_then_to_the_end(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    edit_template(root, lambda doc: doc["provisioners"].pop(3))  # the install-worker one
    t = upstream.load(root)
    assert "cleanup" in str(t.provisioners[t.insert_at].body)

    edit_template(root, lambda doc: doc.update(provisioners=doc["provisioners"][:3]))
    t = upstream.load(root)
    assert t.insert_at == len(t.provisioners) == 3


@pytest.mark.parametrize("fixture", LAYOUTS)
def test_variables_file_overrides_template_defaults(fixture: str) -> None:
    t = upstream.load(DATA / fixture)
    # "" (root layout) or null (templates layout) in the template, set by the variables file
    assert t.variables["volume_type"] == "gp2"
    assert t.variables["ami_name"] is None  # required: no default anywhere
    variables = declared(upstream.hcl_document(t))
    assert variables["volume_type"] == {"type": "string", "default": "gp2"}
    assert variables["ami_name"] == {"type": "string"}


def test_unknown_layout_is_refused(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("not a checkout\n")
    with pytest.raises(UpstreamError, match="holds no templates/al2/template.json or eks-worker"):
        upstream.load(tmp_path)


def test_missing_checkout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UpstreamError, match="is not a directory"):
        upstream.load(tmp_path / "nowhere")


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    (root / "eks-worker-al2-variables.json").write_text('{"arch": "x86_64",}')
    with pytest.raises(UpstreamError, match=r"eks-worker-al2-variables\.json is not valid JSON"):
        upstream.load(root)


def test_env_outside_a_variable_default_is_refused(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    edit_template(root, lambda doc: doc["builders"][0].update(ssh_username="{{env `LOGNAME`}}"))
    with pytest.raises(UpstreamError, match="env only there"):
        upstream.load(root)


def test_undeclared_user_variable_is_refused(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    edit_template(root, lambda doc: doc["builders"][0].update(ssh_username="{{user `nobody`}}"))
    with pytest.raises(UpstreamError, match="nobody"):
        upstream.load(root)


# ---------------------------------------------------------------------------------- conversion


def test_user_references_become_variables_and_derived_defaults_become_locals() -> None:
    t = upstream.load(DATA / "templates-layout")
    doc = hcl.loads(upstream.hcl_document(t))
    source = doc["source"][0]["amazon-ebs"]["worker"]

    assert source["ami_name"] == "${var.ami_name}"
    assert source["ami_description"] == "${var.ami_description}, ${local.ami_component_description}"
    locals_ = doc["locals"][0]
    assert locals_["working_dir"] == (
        '${var.working_dir == null ? "${var.remote_folder}/worker" : var.working_dir}'
    )
    variables = declared(upstream.hcl_document(t))
    assert variables["working_dir"] == {"type": "string", "default": None}
    assert variables["creator"] == {"type": "string", "default": '${env("USER")}'}


def test_build_time_go_templates_stay_literal() -> None:
    t = upstream.load(DATA / "root-layout")
    text = upstream.hcl_document(t)
    tags = hcl.loads(text)["source"][0]["amazon-ebs"]["worker"]["tags"]
    assert tags["created"] == "{{timestamp}}"
    assert tags["source_ami_name"] == "{{ .SourceAMIName }}"
    _, install = provisioners(text)[script_index(provisioners(text), "install-worker")]
    command = "echo 'packer' | {{.Vars}} sudo -S -E bash -eux '{{.Path}}'"
    assert install["execute_command"] == command


def test_template_dir_becomes_the_absolute_template_folder() -> None:
    t = upstream.load(DATA / "templates-layout")
    provs = provisioners(upstream.hcl_document(t))
    uploads = [p["source"] for kind, p in provs if kind == "file" and "direction" not in p]
    al2 = (DATA / "templates-layout" / "templates").resolve()
    assert uploads == [f"{al2}/al2/runtime/", f"{al2}/shared/runtime/"]  # trailing "/" kept
    install = provs[script_index(provs, "install-worker")][1]
    assert install["script"] == f"{al2}/al2/provisioners/install-worker.sh"


def test_builder_blocks_and_maps_keep_their_hcl2_shape() -> None:
    t = upstream.load(DATA / "templates-layout")
    blocks = {x.type for x in t.source if isinstance(x, hcl.Block)}
    assert blocks == {
        "source_ami_filter", "launch_block_device_mappings", "ami_block_device_mappings"
    }
    attrs = {x.key: x.value for x in t.source if isinstance(x, hcl.Attr)}
    assert "type" not in attrs
    assert isinstance(attrs["tags"], dict) and isinstance(attrs["run_tags"], dict)
    assert attrs["ami_users"] == hcl.Expr('compact(split(",", var.ami_users))')
    assert attrs["associate_public_ip_address"] == hcl.Expr(
        'var.associate_public_ip_address == "" ? null : var.associate_public_ip_address'
    )


def test_only_is_mapped_to_the_source_name_and_except_ours_skips_the_provisioner() -> None:
    t = upstream.load(DATA / "root-layout")
    provs = provisioners(upstream.hcl_document(t, source_name="al2"))
    local = [p for kind, p in provs if kind == "shell-local"]
    assert len(local) == 1  # the one with `except: ["amazon-ebs"]` is gone
    assert local[0]["only"] == ["amazon-ebs.al2"]
    assert any("skipped" in note for note in t.notes)


def test_literal_dollar_and_percent_survive_next_to_references(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    edit_template(root, lambda doc: doc["provisioners"][5].update(
        inline=['echo "${HOME} 100%{x} costs $$5 $${{user `ami_name`}}"']
    ))
    text = upstream.hcl_document(upstream.load(root))
    # "$" right before ${var.x} would read as the "$${" escape: it is written as ${"$"}
    assert r'"echo \"$${HOME} 100%%{x} costs $$5 ${"$$"}${var.ami_name}\""' in text
    hcl.loads(text)


# -------------------------------------------------------------------------------- hcl_document


def test_drop_remote_provisioners_keeps_local_ones_and_the_insert_point() -> None:
    t = upstream.load(DATA / "root-layout")
    text = upstream.hcl_document(t, extra_provisioners=[ours()], drop_remote_provisioners=True)
    provs = provisioners(text)
    assert [kind for kind, _ in provs] == ["shell", "shell-local"]
    assert provs[0][1]["inline"] == [OURS]


def test_source_overrides_replace_append_and_remove_settings() -> None:
    t = upstream.load(DATA / "root-layout")
    mapping = hcl.Block("launch_block_device_mappings", (), [hcl.Attr("device_name", "/dev/xvdz")])
    text = upstream.hcl_document(t, source_overrides={
        "region": "eu-west-1",
        "communicator": "none",
        "launch_block_device_mappings": mapping,
        "ssh_pty": None,
        "ami_name": hcl.Expr("local.ami_name"),
    })
    source = hcl.loads(text)["source"][0]["amazon-ebs"]["worker"]
    assert source["region"] == "eu-west-1"
    assert source["communicator"] == "none"
    assert source["launch_block_device_mappings"] == [{"device_name": "/dev/xvdz"}]
    assert "ssh_pty" not in source
    assert source["ami_name"] == "${local.ami_name}"
    assert upstream.load(DATA / "root-layout").source == t.source  # the template is left as it was


def test_packer_block_comes_first_and_post_processors_end_the_build() -> None:
    t = upstream.load(DATA / "root-layout")
    text = upstream.hcl_document(
        t,
        packer_block=hcl.Block("packer", (), [hcl.Attr("required_version", ">= 1.6.0")]),
        post_processors=[hcl.Block("post-processor", ("manifest",), [hcl.Attr("output", "m")])],
    )
    assert text.split("\n\n")[1].startswith('packer {\n  required_version = ">= 1.6.0"')
    assert hcl.loads(text)["build"][0]["post-processor"] == [{"manifest": {"output": "m"}}]
    assert "post-processors are dropped" in text  # upstream's own, said in the header


@needs_packer
def test_packer_accepts_comma_separated_lists_and_bools_from_variables(tmp_path: Path) -> None:
    path = write(tmp_path, upstream.hcl_document(upstream.load(DATA / "root-layout")))
    done = validate(path, ami_users="111122223333,444455556666", associate_public_ip_address="true",
                    working_dir="/opt/worker", volume_size="30")
    assert done.returncode == 0, done.stdout + done.stderr
    done = validate(path, associate_public_ip_address="maybe")
    assert done.returncode != 0 and "associate_public_ip_address" in done.stdout + done.stderr


# ------------------------------------------------------------------------------------------ fetch


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args],
        cwd=cwd, capture_output=True, text=True, check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """A git repository holding the root-layout fixture: tag v1, then a second commit on main."""
    repo = tmp_path / "origin"
    shutil.copytree(DATA / "root-layout", repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "v1")
    git(repo, "tag", "v1")
    (repo / "scripts" / "cleanup.sh").write_text("#!/usr/bin/env bash\necho second\n")
    git(repo, "commit", "-q", "-am", "second")
    return repo


def test_fetch_checks_out_a_tag_or_commit_of_a_local_repository(
    origin: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    at_tag = upstream.fetch(str(origin), "v1", cache)
    head = git(origin, "rev-parse", "HEAD")
    at_commit = upstream.fetch(str(origin), head, cache)

    assert at_tag != at_commit and at_tag.parent == at_commit.parent == cache
    assert "second" not in (at_tag / "scripts" / "cleanup.sh").read_text()
    assert "second" in (at_commit / "scripts" / "cleanup.sh").read_text()
    assert git(at_tag, "rev-parse", "HEAD") == git(origin, "rev-parse", "v1")
    assert upstream.load(at_tag).layout == "root"
    assert upstream.fetch(str(origin), "v1", cache) == at_tag  # cached


def test_fetch_clones_a_git_url(origin: Path, tmp_path: Path) -> None:
    checkout = upstream.fetch(origin.as_uri(), "v1", tmp_path / "cache")
    assert git(checkout, "rev-parse", "HEAD") == git(origin, "rev-parse", "v1")


def test_fetch_fetches_a_ref_missing_from_the_cached_clone(origin: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(UpstreamError, match="ref 'v2' not found"):
        upstream.fetch(str(origin), "v2", cache)
    git(origin, "tag", "v2")
    checkout = upstream.fetch(str(origin), "v2", cache)
    assert git(checkout, "rev-parse", "HEAD") == git(origin, "rev-parse", "v2")


def test_fetch_returns_a_local_folder_as_is_without_a_ref(tmp_path: Path) -> None:
    folder = DATA / "root-layout"
    assert upstream.fetch(str(folder), None, tmp_path) == folder.resolve()
    assert not any(tmp_path.iterdir())


def test_fetch_refuses_bad_refs_missing_paths_and_folders_that_are_no_repository(
    origin: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(UpstreamError, match="ref 'no-such-tag' not found"):
        upstream.fetch(str(origin), "no-such-tag", cache)
    with pytest.raises(UpstreamError, match="is not a directory"):
        upstream.fetch(str(tmp_path / "nowhere"), None, cache)
    with pytest.raises(UpstreamError, match="cannot clone"):
        upstream.fetch(str(copy_fixture(tmp_path)), "v1", cache)  # a folder, not a repository
    with pytest.raises(UpstreamError, match="not a tag, branch or commit"):
        upstream.fetch(str(origin), "--upload-pack=touch /tmp/x", cache)
    with pytest.raises(UpstreamError, match="cannot clone"):
        upstream.fetch((tmp_path / "gone").as_uri(), "v1", cache)
