"""deprecate_after in the Packer template: rendered as deprecate_at for the Packer that runs it (the
amazon plugin of Packer >= 1.7 takes it; 1.6.6 refuses the field), and validated by `packer validate`."""

from __future__ import annotations

from pathlib import Path

from amibuild.pipeline import load
from amibuild.render import SourceAmi, Target
from amibuild.render import assemble
from amibuild.render.render_model import HCL_FILE

PIPELINE = """
pipeline {
  name    = "eks-workers"
  regions = ["us-west-2"]
}
variant "ceph" {
  deprecate_after = "%s"
}
"""


def rendered(tmp_path: Path, after: str, *, uses_plugins: bool) -> str:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE % after)
    pipeline = load(tmp_path / "amibuild.hcl")
    done = assemble.render_variant(pipeline, pipeline.variants[0], uses_plugins=uses_plugins, target=Target(),
                                   sources={r: SourceAmi("lookup") for r in pipeline.regions})
    return done.files[HCL_FILE]


def test_deprecate_after_is_rendered_as_deprecate_at_for_a_plugin_packer(tmp_path):
    text = rendered(tmp_path, "26w", uses_plugins=True)
    assert 'deprecate_at                = timeadd(timestamp(), "4368h")' in text


def test_packer_1_6_gets_no_deprecate_at(tmp_path):
    assert "deprecate_at" not in rendered(tmp_path, "180d", uses_plugins=False)

