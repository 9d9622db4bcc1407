"""amibuild.bake.packer: pure parsers on recorded Packer 1.6.6 output, and the real binary offline.

The recordings in tests/data/packer/ (see its README) come from real builds against the local
emulator; no test here needs the emulator or AWS. Tests of the binary run the installed `packer`
(skipped without one) or a small fake script passed in as the binary.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from amibuild.errors import PackerError, PackerNotFound, PackerOutputError, PackerValidateError, UsageError
from amibuild.bake.packer import SOCKET_NAME_MAX, SOCKET_PATH_MAX, blame, check_temp_room, temp_prefix
from amibuild.bake.packer import (
    MIN_VERSION,
    MachineLine,
    Packer,
    PackerVersion,
    cross_check,
    error_summary,
    escape_field,
    manifest_builds,
    parse_line,
    parse_machine_readable,
    parse_manifest,
    parse_version,
    progress_step,
)

DATA = Path(__file__).parent / "data" / "packer"
WORKER = "amazon-ebs.worker"


def recorded(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines(keepends=True)


def build_result(name: str):
    return parse_machine_readable(recorded(name))


def manifest(name: str) -> str:
    return (DATA / name).read_text()


# ---------------------------------------------------------------------------------------- version

OUT_OF_DATE_1_11 = """Packer v1.11.2

Your version of Packer is out of date! The latest version
is 1.12.0. You can update by downloading from www.packer.io/downloads
"""
MACHINE_READABLE_1_6_6 = """1796000028,,version,1.6.6
1796000028,,version-prelease,
1796000028,,version-commit,
1796000028,,ui,say,Packer v1.6.6
"""


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Packer v1.6.6\n", PackerVersion(1, 6, 6)),
        (OUT_OF_DATE_1_11, PackerVersion(1, 11, 2)),
        (MACHINE_READABLE_1_6_6, PackerVersion(1, 6, 6)),
        ("1.6.6\n", PackerVersion(1, 6, 6)),  # packer --version
        ("Packer v1.10.0-dev (abc1234)\n", PackerVersion(1, 10, 0)),
    ],
    ids=["1.6.6", "1.11-out-of-date", "machine-readable", "dash-dash-version", "dev-build"],
)
def test_parse_version_reads_every_version_output(text, want):
    assert parse_version(text) == want


@pytest.mark.parametrize("text", ["", "hello world\n", "Packer vX.Y\n", "1796000028,,ui,say,hi\n"])
def test_parse_version_refuses_garbage(text):
    with pytest.raises(PackerError, match="cannot read a Packer version"):
        parse_version(text)


def test_versions_order_numerically_and_plugins_start_at_1_7():
    assert MIN_VERSION < PackerVersion(1, 6, 6) < PackerVersion(1, 9, 0) < PackerVersion(1, 11, 2)
    assert not PackerVersion(1, 6, 6).uses_plugins
    assert PackerVersion(1, 7, 0).uses_plugins
    assert PackerVersion(1, 11, 2).uses_plugins
    assert str(PackerVersion(1, 11, 2)) == "1.11.2"


# ------------------------------------------------------------------------------------ parse_line


def test_parse_line_unescapes_commas_newlines_and_carriage_returns():
    line = "1796000000,amazon-ebs.worker,ui,message,one%!(PACKER_COMMA) two\\nthree\\rfour\r\n"
    assert parse_line(line) == MachineLine(
        1796000000, "amazon-ebs.worker", "ui", ("message", "one, two\nthree\rfour")
    )


def test_parse_line_splits_data_fields_on_real_commas_only():
    line = (
        "1796000023,amazon-ebs.worker,artifact,0,id,"
        "eu-west-1:ami-1%!(PACKER_COMMA)us-east-1:ami-2\n"
    )
    parsed = parse_line(line)
    assert parsed.data == ("0", "id", "eu-west-1:ami-1,us-east-1:ami-2")


def test_escape_field_writes_a_value_as_packer_does_and_parse_line_reads_it_back():
    text = "pa,ss\nword\r"
    assert escape_field(text) == "pa%!(PACKER_COMMA)ss\\nword\\r"
    assert parse_line(f"1,,ui,say,{escape_field(text)}").data == ("say", text)


def test_parse_line_keeps_an_empty_data_field():
    assert parse_line("1796000028,,version-prelease,").data == ("",)


@pytest.mark.parametrize(
    "line",
    ["", "\n", "Error: Unset variable", "hello, world", "abc,,ui,say,x", "12,,UI,say,x", "12"],
)
def test_parse_line_returns_none_for_raw_lines(line):
    assert parse_line(line) is None


# ------------------------------------------------------------------------ parse_machine_readable


def test_single_region_build_yields_one_ami():
    result = build_result("build-single-region.out")
    assert result.artifacts == {WORKER: {"us-west-2": "ami-8d96552850364f430"}}
    assert (result.errors, result.error_count, result.cancelled) == ([], None, False)
    assert result.failed_step is None and result.first_error is None


def test_duplicate_artifacts_from_the_manifest_post_processor_merge():
    lines = recorded("build-single-region.out")
    assert any(",artifact,1,id," in line for line in lines)  # 1.6.6 prints it twice
    assert build_result("build-single-region.out").artifacts == {
        WORKER: {"us-west-2": "ami-8d96552850364f430"}
    }


def test_multi_region_build_yields_every_region():
    assert build_result("build-multi-region.out").artifacts == {
        WORKER: {
            "eu-west-1": "ami-bea6749ad110c304a",
            "us-east-1": "ami-065bbeb4ccf698ab0",
            "us-west-2": "ami-c304e3a6c4c8f13c8",
        }
    }


def test_artifacts_that_disagree_for_a_region_are_refused():
    lines = [
        "1,amazon-ebs.worker,artifact,0,builder-id,mitchellh.amazonebs",
        "1,amazon-ebs.worker,artifact,0,id,us-west-2:ami-aaa",
        "1,amazon-ebs.worker,artifact,1,builder-id,mitchellh.amazonebs",
        "1,amazon-ebs.worker,artifact,1,id,us-west-2:ami-bbb",
    ]
    with pytest.raises(PackerOutputError, match="us-west-2: ami-aaa and ami-bbb"):
        parse_machine_readable(lines)


def test_artifacts_of_other_builders_are_ignored():
    lines = [
        "1,file.notes,artifact,0,builder-id,packer.file",
        "1,file.notes,artifact,0,id,notes.txt",
        "1,amazon-ebsvolume.data,artifact,0,builder-id,mitchellh.amazon.ebsvolume",
        "1,amazon-ebsvolume.data,artifact,0,id,us-west-2:vol-123",
    ]
    assert parse_machine_readable(lines).artifacts == {}


def test_an_artifact_id_that_is_not_region_ami_is_refused():
    lines = [
        "1,amazon-ebs.worker,artifact,0,builder-id,mitchellh.amazonebs",
        "1,amazon-ebs.worker,artifact,0,id,us-west-2",
    ]
    with pytest.raises(PackerOutputError, match="not region:ami"):
        parse_machine_readable(lines)


def test_failed_provisioner_gives_one_error_and_the_step_it_failed_in():
    result = build_result("build-shell-local-fails.out")
    message = "Script exited with non-zero exit status: 1.Allowed exit codes are: [0]"
    assert result.artifacts == {}
    assert result.errors == [f"{WORKER}: {message}"]  # four copies in the stream, one here
    assert result.build_errors == {WORKER: message}
    assert result.error_count == 1
    assert result.failed_step == "Running local shell script"


def test_missing_source_ami_error_is_one_line_with_commas_restored():
    result = build_result("build-missing-source-ami.out")
    assert result.errors == [
        f"{WORKER}: Error querying AMI: InvalidAMIID.NotFound: The image id "
        "'[ami-00000000deadbeef0]' does not exist status code: 400, request id: request-id"
    ]
    assert result.error_count == 1
    assert result.failed_step == "Prevalidating AMI Name"


def test_cancelled_build_is_reported_as_cancelled_not_as_an_error():
    result = build_result("build-cancelled.out")
    assert result.cancelled
    assert result.errors == [] and result.artifacts == {}
    assert result.failed_step == "Running local shell script"


def test_template_diagnostics_become_one_line_errors():
    # recorded from `packer build -machine-readable` on a template with an unset variable
    line = (
        '1796000093,,ui,error,Error: Unset variable "region"\\n\\nA used variable must be set or '
        "have a default value; see\\nhttps://packer.io/docs/configuration/from-1.5/syntax for "
        "details.\\n\\n"
    )
    assert parse_machine_readable([line]).errors == [
        'Unset variable "region": A used variable must be set or have a default value; see '
        "https://packer.io/docs/configuration/from-1.5/syntax for details."
    ]


def test_raw_lines_are_kept_aside():
    result = parse_machine_readable(["panic: boom\n", "\n", "1,,ui,say,ok\n"])
    assert result.unparsed == ["panic: boom"]


# recorded from Packer 1.6.6 (`null` builder, a shell-local provisioner that echoes to stdout and to
# stderr, exit 0): a provisioner's stderr comes out as `ui,error` lines of a build that succeeded
PROVISIONER_STDERR = [
    "1796681053,,ui,say,==> null.worker: Running local shell script: /tmp/packer-shell2199319393\n",
    "1796681053,,ui,message,    null.worker: to stdout%!(PACKER_COMMA) yes\n",
    "1796681053,,ui,error,==> null.worker: to stderr%!(PACKER_COMMA) warning\n",
    "1796681053,,ui,say,Build 'null.worker' finished after 8 milliseconds 675 microseconds.\n",
    "1796681053,,ui,say,\\n==> Wait completed after 8 milliseconds 840 microseconds\n",
    "1796681053,,ui,say,\\n==> Builds finished. The artifacts of successful builds are:\n",
    "1796681053,null.worker,artifact-count,1\n",
    "1796681053,null.worker,artifact,0,builder-id,fnoeding.null\n",
    "1796681053,null.worker,artifact,0,id,Null\n",
    "1796681053,null.worker,artifact,0,end\n",
]


def test_provisioner_stderr_of_a_build_that_finished_is_not_an_error():
    result = parse_machine_readable(PROVISIONER_STDERR)
    assert result.errors == [] and result.first_error is None
    assert result.failed_step is None


def test_provisioner_stderr_of_a_build_that_never_finished_is_kept():
    # no "finished" line (Packer killed outright): nothing says the build went well
    result = parse_machine_readable(PROVISIONER_STDERR[:3])
    assert result.errors == ["null.worker: to stderr, warning"]
    assert result.failed_step == "Running local shell script"



# a provisioner's stderr (here an xtrace line) comes out as `ui,error,==> <build>:` lines, before the failure
STDERR = "1796000023,,ui,error,==> amazon-ebs.worker: + yum install -y kernel-devel\n"
STEP = "1796000023,,ui,say,==> amazon-ebs.worker: "


def with_stderr_first(name: str, after: str) -> list[str]:
    lines = recorded(name)
    at = next(n for n, line in enumerate(lines) if after in line) + 1
    return lines[:at] + [STDERR] + lines[at:]


def test_a_failed_build_is_reported_by_packers_verdict_not_by_the_stderr_before_it():
    result = parse_machine_readable(with_stderr_first("build-shell-local-fails.out", "Running local shell script"))
    assert result.first_error == f"{WORKER}: Script exited with non-zero exit status: 1.Allowed exit codes are: [0]"
    assert result.failed_step == "Running local shell script"
    copy = [STEP + "Provisioning with shell script: /tmp/x\n", STDERR, STEP + "Creating AMI x-1 from instance i-1\n",
            STEP + "Copying/Encrypting AMI (ami-1) to other regions...\n",
            "1,,ui,error,==> amazon-ebs.worker: Error Copying AMI (ami-1) to region (eu-west-1): boom\n",
            STEP + "Terminating the source AWS instance...\n",
            "1,,ui,error,Build 'amazon-ebs.worker' errored after 3 seconds: Error Copying AMI (ami-1) to region "
            "(eu-west-1): boom\n", "1,amazon-ebs.worker,error,Error Copying AMI (ami-1) to region (eu-west-1): boom\n"]
    result = parse_machine_readable(copy)
    assert result.first_error == f"{WORKER}: Error Copying AMI (ami-1) to region (eu-west-1): boom"
    assert result.failed_step == "Copying AMI to other regions"


def test_a_cancel_names_the_step_it_came_in_not_the_step_of_earlier_stderr():
    lines = with_stderr_first("build-cancelled.out", "Prevalidating AMI Name")
    cancel = next(n for n, line in enumerate(lines) if "Cancelling build" in line)
    # killed before its cleanup finished (--timeout's SIGKILL): no "finished" withdraws the stderr line
    assert parse_machine_readable(lines[:cancel + 2]).failed_step == "Running local shell script"


# --------------------------------------------------------------------------------- progress_step


SAY = "1,,ui,say,==> amazon-ebs.worker: "


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (SAY + "Launching a source AWS instance...", "Launching a source AWS instance"),
        (
            SAY + "Copying/Encrypting AMI (ami-c304e3a6c4c8f13c8) to other regions...",
            "Copying AMI to other regions",
        ),
        (
            SAY + "Waiting for instance (i-e80dce54071c0576f) to become ready...",
            "Waiting for instance to become ready",
        ),
        (SAY + "Running local shell script: /tmp/packer-shell1", "Running local shell script"),
        (SAY + "Creating AMI x-1 from instance i-1", "Creating AMI"),
        ("1,,ui,message,    amazon-ebs.worker: Copying to: eu-west-1", None),
        ("1,,ui,error,==> amazon-ebs.worker: Error querying AMI: nope", None),
        ("1,,ui,say,\\n==> Builds finished. The artifacts of successful builds are:", None),
        ("1,amazon-ebs.worker,artifact,0,id,us-west-2:ami-1", None),
        ("==> amazon-ebs.worker: Launching a source AWS instance...", None),
    ],
)
def test_progress_step_names_only_step_announcements(line, want):
    assert progress_step(line) == want


def test_progress_steps_of_a_recorded_build_come_in_order():
    steps = [s for s in map(progress_step, recorded("build-multi-region.out")) if s]
    wanted = [
        "Launching a source AWS instance",
        "Creating AMI",
        "Copying AMI to other regions",
        "Running post-processor",
    ]
    assert [s for s in steps if s in wanted] == wanted


# -------------------------------------------------------------------------------------- manifest


def test_manifest_selects_only_the_last_run():
    text = manifest("manifest-two-runs.json")
    assert "ami-8d96552850364f430" in text  # the first run is still in the file
    assert parse_manifest(text) == {WORKER: {"us-west-2": "ami-9257289518e0216ff"}}


def test_manifest_exposes_custom_data_and_run_of_the_last_run():
    (build,) = manifest_builds(manifest("manifest-two-runs.json"))
    assert build.name == WORKER and build.builder_type == "amazon-ebs"
    assert build.custom_data == {"variant": "single"}
    assert build.run_uuid == "ec12aeb3-4176-2b3f-26f9-aeeb63d1fa14"


def test_manifest_splits_multi_region_artifact_ids_on_real_commas():
    assert parse_manifest(manifest("manifest-multi-region.json")) == {
        WORKER: {
            "eu-west-1": "ami-bea6749ad110c304a",
            "us-east-1": "ami-065bbeb4ccf698ab0",
            "us-west-2": "ami-c304e3a6c4c8f13c8",
        }
    }


def test_manifest_and_stream_name_builds_alike():
    assert set(parse_manifest(manifest("manifest-multi-region.json"))) == set(
        build_result("build-multi-region.out").artifacts
    )


def test_manifest_leaves_out_builds_that_are_not_amis():
    text = (
        '{"builds": [{"name": "x", "builder_type": "null", "artifact_id": "Null",'
        ' "packer_run_uuid": "r"}], "last_run_uuid": "r"}'
    )
    assert parse_manifest(text) == {}
    assert [b.name for b in manifest_builds(text)] == ["null.x"]


@pytest.mark.parametrize("text", ["not json", "[]", '{"builds": []}', '{"last_run_uuid": "r"}'])
def test_unreadable_manifest_is_refused(text):
    with pytest.raises(PackerOutputError, match="unreadable Packer manifest"):
        parse_manifest(text)


# ----------------------------------------------------------------------------------- cross_check


def test_cross_check_returns_the_amis_when_stream_and_manifest_agree():
    stream = build_result("build-multi-region.out").artifacts
    recorded_amis = parse_manifest(manifest("manifest-multi-region.json"))
    assert cross_check(stream, recorded_amis) == stream[WORKER]
    rerun = build_result("build-single-region-rerun.out").artifacts
    assert cross_check(rerun, parse_manifest(manifest("manifest-two-runs.json"))) == {
        "us-west-2": "ami-9257289518e0216ff"
    }


def test_cross_check_names_region_and_both_amis_when_they_disagree():
    first_run = build_result("build-single-region.out").artifacts
    with pytest.raises(PackerOutputError) as caught:
        cross_check(first_run, parse_manifest(manifest("manifest-two-runs.json")))
    message = str(caught.value)
    assert "\n" not in message
    assert "us-west-2" in message
    assert "ami-8d96552850364f430 (output)" in message
    assert "ami-9257289518e0216ff (manifest)" in message


def test_cross_check_names_a_region_missing_on_one_side():
    stream = {WORKER: {"us-west-2": "ami-1", "eu-west-1": "ami-2"}}
    wanted = r"in eu-west-1: ami-2 \(output\) vs no AMI \(manifest\)"
    with pytest.raises(PackerOutputError, match=wanted):
        cross_check(stream, {WORKER: {"us-west-2": "ami-1"}})


def test_cross_check_refuses_an_empty_side():
    manifest_amis = parse_manifest(manifest("manifest-multi-region.json"))
    failed = build_result("build-shell-local-fails.out").artifacts
    with pytest.raises(PackerOutputError, match="output names no AMI"):
        cross_check(failed, manifest_amis)
    with pytest.raises(PackerOutputError, match="manifest's last run has no AMI"):
        cross_check(build_result("build-multi-region.out").artifacts, {})
    with pytest.raises(PackerOutputError, match="no AMI"):
        cross_check({}, {})


def test_cross_check_needs_a_name_when_there_are_several_builds():
    both = {WORKER: {"us-west-2": "ami-1"}, "amazon-ebs.arm": {"us-west-2": "ami-2"}}
    with pytest.raises(PackerOutputError, match="several builds"):
        cross_check(both, both)
    assert cross_check(both, both, name="amazon-ebs.arm") == {"us-west-2": "ami-2"}


# ---------------------------------------------------------------------------------- error_summary


def test_error_summary_joins_a_list_of_problems():
    output = (
        "Error: 2 error(s) occurred:\n\n* ami_name must be specified\n"
        "* either instance_type or spot_instance_types must be specified\n\n"
        "  on a.pkr.hcl line 5:\n  (source code not available)\n\n"
    )
    assert error_summary(output) == (
        "2 error(s) occurred (a.pkr.hcl line 5): ami_name must be specified; "
        "either instance_type or spot_instance_types must be specified"
    )


def test_error_summary_falls_back_to_the_first_line():
    assert error_summary('\n"/nope": stat /nope: no such file or directory\n') == (
        '"/nope": stat /nope: no such file or directory'
    )


# ------------------------------------------------------------------------------------ the binary

needs_packer = pytest.mark.skipif(shutil.which("packer") is None, reason="no packer binary on PATH")

GOOD_TEMPLATE = """variable "greeting" {
  type = string
}

source "null" "worker" {
  communicator = "none"
}

build {
  sources = ["source.null.worker"]

  provisioner "shell-local" {
    inline = ["echo ${var.greeting}"]
  }
}
"""


@pytest.fixture(scope="module")
def packer(tmp_path_factory) -> Packer:
    home = tmp_path_factory.mktemp("home")
    # a minimal environment: validate and fmt need no AWS, so none reaches packer
    return Packer(env={"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home)})


@pytest.fixture
def template(tmp_path) -> Path:
    (tmp_path / "build.pkr.hcl").write_text(GOOD_TEMPLATE)
    return tmp_path


def fake_packer(tmp_path: Path, version: str) -> Packer:
    """A stand-in binary: answers `version` and logs every other command line."""
    script = tmp_path / "fake-packer"
    script.write_text(
        '#!/bin/sh\nif [ "$1" = version ]; then echo "Packer v$FAKE_VERSION"; exit 0; fi\n'
        'echo "$@" >> "$FAKE_LOG"\n[ "$1" = init ] && [ -n "$FAKE_FAIL" ] && '
        '{ printf "Error: Failed to install plugin\\n\\nno route to github.com\\n"; exit 1; }\n'
        "exit 0\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": os.defpath, "FAKE_VERSION": version, "FAKE_LOG": str(tmp_path / "calls.log")}
    return Packer(str(script), env=env)


@needs_packer
def test_version_reads_the_installed_binary_once(packer):
    version = packer.version()
    assert version >= MIN_VERSION
    assert packer.version() is version


# GOOD_TEMPLATE whose variable Packer checks: the value validate sees decides whether it passes
CHECKED_TEMPLATE = GOOD_TEMPLATE.replace("  type = string\n}", """  type = string
  validation {
    condition     = length(var.greeting) > 3
    error_message = "The greeting must be longer than three characters."
  }
}""", 1)
TOO_SHORT = "The greeting must be longer than three characters."


@needs_packer
def test_validate_passes_the_given_variables_and_var_files_to_packer(packer, template, tmp_path_factory):
    (template / "build.pkr.hcl").write_text(CHECKED_TEMPLATE)
    assert packer.validate(template, variables={"greeting": "hello, world"}) is None
    with pytest.raises(PackerValidateError, match=TOO_SHORT):  # the value given is the one checked
        packer.validate(template, variables={"greeting": "hi"})
    var_file = tmp_path_factory.mktemp("vars") / "greeting.pkrvars.hcl"
    var_file.write_text('greeting = "hello"\n')
    assert packer.validate(template, var_files=[var_file]) is None
    var_file.write_text('greeting = "hi"\n')
    with pytest.raises(PackerValidateError, match=TOO_SHORT):
        packer.validate(template, var_files=[var_file])


@needs_packer
def test_validate_reads_auto_pkrvars_in_the_directory(packer, template):
    (template / "build.pkr.hcl").write_text(CHECKED_TEMPLATE)
    with pytest.raises(PackerValidateError, match='Unset variable "greeting"'):
        packer.validate(template)  # the control: nothing sets it yet
    (template / "greeting.auto.pkrvars.hcl").write_text('greeting = "hello"\n')
    assert packer.validate(template) is None
    (template / "greeting.auto.pkrvars.hcl").write_text('greeting = "hi"\n')
    with pytest.raises(PackerValidateError, match=TOO_SHORT):
        packer.validate(template)


@needs_packer
def test_validate_refuses_a_bad_template_with_a_one_line_message(packer, template):
    bad = GOOD_TEMPLATE.replace('"none"', '"none"\n  foo          = 1')
    (template / "build.pkr.hcl").write_text(bad)
    with pytest.raises(PackerValidateError) as caught:
        packer.validate(template, variables={"greeting": "hi"})
    message = str(caught.value)
    assert "\n" not in message
    assert str(template) in message
    assert (
        'Unsupported argument (build.pkr.hcl line 7): An argument named "foo" is not expected here.'
    ) in message
    assert "Error: Unsupported argument" in caught.value.output


@needs_packer
def test_validate_names_an_unset_variable(packer, template):
    with pytest.raises(PackerValidateError, match='Unset variable "greeting"'):
        packer.validate(template)


@needs_packer
def test_fmt_check_lists_unformatted_files(packer, template):
    assert packer.fmt_check(template) == []
    (template / "messy.pkr.hcl").write_text('locals {\n  a = 1\n  bbb = 2\n}\n')
    assert packer.fmt_check(template) == ["messy.pkr.hcl"]


@needs_packer
def test_fmt_check_refuses_a_file_that_does_not_parse(packer, template):
    (template / "broken.pkr.hcl").write_text('locals {\n  a = \n')
    with pytest.raises(PackerValidateError, match="broken.pkr.hcl"):
        packer.fmt_check(template)


@needs_packer
def test_missing_template_directory_is_not_mistaken_for_a_missing_binary(packer, tmp_path):
    with pytest.raises(PackerError, match="no template directory at") as caught:
        packer.validate(tmp_path / "nowhere")
    assert not isinstance(caught.value, PackerNotFound)


def test_missing_binary_raises_packer_not_found_with_install_hint(tmp_path):
    with pytest.raises(PackerNotFound, match="apt-get install -y packer"):
        Packer(str(tmp_path / "no-such-packer")).version()
    with pytest.raises(PackerNotFound, match="packer not found"):
        Packer("packer", env={"PATH": str(tmp_path)}).version()


def test_too_old_binary_raises_packer_not_found(tmp_path):
    with pytest.raises(PackerNotFound, match="1.5.6 .* is older than 1.6.0"):
        fake_packer(tmp_path, "1.5.6").version()


def test_init_runs_only_for_versions_with_plugins(tmp_path):
    fake_packer(tmp_path, "1.6.6").init(tmp_path)
    assert not (tmp_path / "calls.log").exists()
    fake_packer(tmp_path, "1.11.2").init(tmp_path)
    assert (tmp_path / "calls.log").read_text() == f"init {tmp_path}\n"


def test_init_failure_is_one_line(tmp_path):
    fake = fake_packer(tmp_path, "1.11.2")
    fake.env["FAKE_FAIL"] = "1"
    wanted = r"packer init refused .*: Failed to install plugin: no route to github.com$"
    with pytest.raises(PackerError, match=wanted):
        fake.init(tmp_path)


def test_build_argv_is_machine_readable_with_absolute_paths(tmp_path, monkeypatch):
    tmp_path = tmp_path.resolve()
    fake = fake_packer(tmp_path, "1.6.6")
    monkeypatch.chdir(tmp_path)
    argv = fake.build_argv(
        "tpl",
        var_files=["a.pkrvars.hcl"],
        variables={"region": "us-west-2", "encrypt": True},
        only=[WORKER],
    )
    assert argv == [
        str(tmp_path / "fake-packer"),
        "build",
        "-machine-readable",
        "-color=false",
        f"-only={WORKER}",
        f"-var-file={tmp_path / 'a.pkrvars.hcl'}",
        "-var",
        "region=us-west-2",
        "-var",
        "encrypt=true",
        str(tmp_path / "tpl"),
    ]


def test_packer_never_asks_checkpoint_unless_told():
    # besides checkpoint, Packer's environment gets nothing: what a sandbox build's stand-in step
    # needs comes with that build's render (`Rendered.packer_env`), not with every run
    assert Packer(env={}).env["CHECKPOINT_DISABLE"] == "1"
    assert set(Packer(env={}).env) == {"CHECKPOINT_DISABLE"}
    assert Packer(env={"CHECKPOINT_DISABLE": ""}).env["CHECKPOINT_DISABLE"] == ""


# -------------------------------------------------------------------------------- refusals: whose fault


def test_a_refusal_naming_a_value_the_user_set_is_blamed_on_its_flag() -> None:
    output = (DATA / "validate-kms-without-encrypt.out").read_text()
    origins = {"kms_key_id": "--var kms_key_id", "encrypted": "defaults", "os": "--os al2"}
    assert blame(output, origins) == ("kms_key_id", "--var kms_key_id")


def test_a_refusal_naming_only_defaults_is_amibuilds_fault() -> None:
    output = (DATA / "validate-kms-without-encrypt.out").read_text()
    assert blame(output, {"kms_key_id": "defaults", "encrypted": "defaults"}) is None
    # a plain word of Packer's prose never blames a setting of that name
    assert blame("Error: the os image is gone", {"os": "--os al2"}) is None


def test_an_attribute_packer_names_is_blamed_on_the_setting_that_fills_it() -> None:
    output = "* encrypt_boot must be true when kms_key_id is set"
    assert blame(output, {"encrypted": "amibuild.hcl: defaults: encrypted"}) == (
        "encrypted", "amibuild.hcl: defaults: encrypted")


@pytest.mark.parametrize("temp_dir, fits", [
    ("/tmp", True),
    ("/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T", True),  # macOS's per-user TMPDIR
    ("/" + "t" * 60, False),
])
def test_the_temp_folder_must_leave_room_for_packers_plugin_sockets(temp_dir: str, fits: bool) -> None:
    run_id = "20261207T211356Z-94790f"
    # the longest socket path a build can make: <temp>/<the run's folder, mkdtemp's 8 characters>/<socket>
    longest = len(f"{temp_dir}/{temp_prefix(run_id)}12345678/") + SOCKET_NAME_MAX
    assert temp_prefix(run_id) == "amibuild-94790f-"
    assert (longest <= SOCKET_PATH_MAX) is fits
    if fits:
        check_temp_room(temp_dir)
    else:
        with pytest.raises(UsageError, match=f"TMPDIR {temp_dir}: too long"):
            check_temp_room(temp_dir)
