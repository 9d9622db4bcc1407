"""amibuild's provisioners in a build: its own steps (proxy, repositories, packages), the scripts the
pipeline names, the stage-1 checks, the clean-up and the checks of the clean-up (hygiene), in
order, with the files they ship."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from amibuild import hcl
from amibuild.errors import PackageDataMissing, SpecError
from amibuild.pipeline import Variant, imagetests
from amibuild.render.render_model import Provisioner, ProvisionerKind

# Package data: found through importlib.resources, so an installed wheel carries and finds them.
PROVISION_SCRIPTS = Path(str(resources.files("amibuild.render") / "provision"))


def provisioning_steps(values: Mapping[str, Any]) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    """Our own steps the values call for, in order: each a script shipped into build/<variant>/scripts/
    (a file under amibuild/render/provision/) and its environment (NAME -> HCL expression)."""
    steps = [
        ("configure-proxy.sh", (
            ("AMIBUILD_HTTP_PROXY", "var.http_proxy"),
            ("AMIBUILD_HTTPS_PROXY", "var.https_proxy"),
            ("AMIBUILD_NO_PROXY", "var.no_proxy"),
        ), values["http_proxy"] or values["https_proxy"]),
        ("add-repos.sh", (("AMIBUILD_REPOS", 'join("\\n", var.extra_repos)'),), values["extra_repos"]),
        ("install-packages.sh", (("AMIBUILD_EXTRA_PACKAGES", 'join(" ", var.extra_packages)'),), values["extra_packages"]),
    ]
    return [(script, env) for script, env, needed in steps if needed]


EXECUTE = "sudo -S env {{ .Vars }} bash -eu '{{ .Path }}'"


def _shell(script: str, execute: str = EXECUTE, env: tuple[tuple[str, str], ...] = ()) -> hcl.Block:
    """A shell provisioner that runs ``script`` (a path beside the template) as root, with ``execute``
    and ``env`` (NAME -> HCL expression)."""
    block = hcl.Block("provisioner", ("shell",))
    block.attr("script", hcl.template([hcl.Expr("path.root"), f"/{script}"])).attr("execute_command", execute)
    if env:
        block.attr("environment_vars", [hcl.template([f"{name}=", hcl.Expr(expr)]) for name, expr in env])
    return block


def provisioner_blocks(variant: Variant, values: Mapping[str, Any]) -> tuple[list[hcl.Block], dict[str, str]]:
    """Our provisioner blocks (in order) and the files they need shipped beside the template."""
    early, late, shipped = provisioner_groups(variant, values)
    return [p.block for p in (*early, *late)], shipped


EARLY_STEPS = frozenset({"configure-proxy.sh"})  # must run before anything reaches the network


def provisioner_groups(variant: Variant, values: Mapping[str, Any], *,
                       keep_tmp: hcl.Expr | None = None) -> tuple[list[Provisioner], list[Provisioner], dict[str, str]]:
    """Our provisioners split in two: the steps that go before anything reaches the network (the
    proxy), and the rest (repositories, packages, user scripts, the checks, the cache cleanup, the
    clean-up, its hygiene checks last); and the files they ship. ``keep_tmp``: an HCL expression
    naming what the clean-up leaves in /tmp for later steps (the upstream base's)."""
    early: list[Provisioner] = []
    late: list[Provisioner] = []
    shipped: dict[str, str] = {}
    for script, env in provisioning_steps(values):
        shipped[f"scripts/{script}"] = _read_packaged(PROVISION_SCRIPTS / script)
        group = early if script in EARLY_STEPS else late
        group.append(Provisioner(ProvisionerKind.STEP, script, env, _shell(f"scripts/{script}", env=env)))
    for index, script in enumerate(variant.scripts, start=1):
        name = f"scripts/user-{index:02d}-{script.name}"
        shipped[name] = _read(script)
        late.append(Provisioner(ProvisionerKind.SCRIPT, Path(name).name, (), _shell(name)))
    checks = checks_step(variant)
    if checks is not None:  # the last step before clean-up, where upstream runs validate.sh
        block, script = checks
        shipped[CHECKS_SCRIPT] = script
        late.append(Provisioner(ProvisionerKind.CHECKS, Path(CHECKS_SCRIPT).name, (), block))
    late += inventory_steps(shipped)  # before the clean-up, which removes /tmp/amibuild-*
    if early or late:
        cleanup = hcl.Block("provisioner", ("shell",)).attr("inline", [
            "sudo yum clean all 2>/dev/null || sudo dnf clean all",
            "sudo rm -rf /var/cache/yum /var/cache/dnf /tmp/amibuild-*",
        ])
        late.append(Provisioner(ProvisionerKind.CLEANUP, "cache cleanup", (), cleanup))
    late += cleanup_steps(variant, shipped, keep_tmp=keep_tmp)
    return early, late, shipped


def cleanup_steps(variant: Variant, shipped: dict[str, str], *, keep_tmp: hcl.Expr | None) -> list[Provisioner]:
    """The clean-up of the build instance and its checks (the build's last step), their files added
    to ``shipped``."""
    shipped[CLEANUP_SCRIPT] = _read_packaged(PROVISION_SCRIPTS / Path(CLEANUP_SCRIPT).name)
    env = (("AMIBUILD_KEEP_TMP", keep_tmp.text),) if keep_tmp is not None else ()
    out = [Provisioner(ProvisionerKind.CLEANUP, Path(CLEANUP_SCRIPT).name, env, _shell(CLEANUP_SCRIPT, env=env))]
    hygiene = imagetests.check_set(variant, stage=imagetests.HYGIENE).checks
    if hygiene:  # the very last: nothing that runs after it can undo the clean-up unseen (none: all turned off)
        shipped[HYGIENE_SCRIPT] = imagetests.checks_script(hygiene)
        out.append(Provisioner(ProvisionerKind.HYGIENE, Path(HYGIENE_SCRIPT).name, (), _shell(HYGIENE_SCRIPT)))
    return out


CHECKS_SCRIPT = "scripts/amibuild-checks.sh"
CLEANUP_SCRIPT = "scripts/cleanup.sh"  # amibuild/render/provision/cleanup.sh
HYGIENE_SCRIPT = "scripts/amibuild-hygiene.sh"


INVENTORY_SCRIPT = "scripts/inventory.sh"
INVENTORY_REMOTE = "/tmp/amibuild-inventory.tsv"  # on the build instance, until the download
INVENTORY_FILE = "inventory.tsv"  # beside the template: what build-ami reads after the build


def inventory_steps(shipped: dict[str, str]) -> list[Provisioner]:
    """Stage 1's inventory: a step that lists every installed package into `INVENTORY_REMOTE` (its
    stdout, so that 1,500 lines stay out of Packer's log), then a download of it beside the template;
    its script added to ``shipped``."""
    script = _shell(INVENTORY_SCRIPT, f"{EXECUTE} >{INVENTORY_REMOTE}")
    fetch = hcl.Block("provisioner", ("file",)).attr("direction", "download").attr("source", INVENTORY_REMOTE)
    fetch.attr("destination", hcl.template([hcl.Expr("path.root"), f"/{INVENTORY_FILE}"]))
    shipped[INVENTORY_SCRIPT] = _read_packaged(PROVISION_SCRIPTS / Path(INVENTORY_SCRIPT).name)
    return [Provisioner(ProvisionerKind.INVENTORY, Path(INVENTORY_SCRIPT).name, (), script),
            Provisioner(ProvisionerKind.INVENTORY, INVENTORY_FILE, (), fetch)]


def checks_step(variant: Variant) -> tuple[hcl.Block, str] | None:
    """Stage 1: the provisioner that runs the variant's checks on the build instance, and its script."""
    return (_shell(CHECKS_SCRIPT), checks_script(variant)) if variant.test_on_build else None


def checks_script(variant: Variant) -> str:
    return imagetests.checks_script(imagetests.check_set(variant).checks)


def _read(path: Path) -> str:
    """A script the pipeline file names: the user's to fix."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the script ({exc.strerror})") from exc


def _read_packaged(path: Path) -> str:
    """One of amibuild's own scripts: missing means a broken install, not bad input."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PackageDataMissing(f"{path}: amibuild's own provisioner script is missing or unreadable "
                                 f"({exc.strerror}); the installation is incomplete: reinstall amibuild") from exc
