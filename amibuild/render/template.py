"""The HCL text amibuild writes: its strict jinja2 template (package data) and the blocks it
puts into a template (a variable, the manifest post-processor)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from amibuild import hcl
from amibuild.errors import PackageDataMissing, TemplateError
from amibuild.render.render_model import PackerVariable

# Package data: found through importlib.resources, so an installed wheel carries and finds them.
TEMPLATES = Path(str(resources.files("amibuild.render") / "templates"))


def manifest_block(variant_name: str) -> hcl.Block:
    """The manifest post-processor every build ends with; custom_data ties it to the run."""
    return (hcl.Block("post-processor", ("manifest",))
            .attr("output", hcl.template([hcl.Expr("path.root"), "/manifest.json"]))
            .attr("strip_path", True)
            .attr("custom_data", {"variant": variant_name, "amibuild_run_id": hcl.Expr("var.amibuild_run_id")}))


@lru_cache(maxsize=1)
def _environment():
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("amibuild.render", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["q"] = hcl.quote
    env.filters["hcl"] = lambda value: hcl.value(value, "  ")
    return env


def render_template(name: str, **context: Any) -> str:
    try:
        return _environment().get_template(name).render(**context)
    except jinja2.TemplateNotFound as exc:
        raise PackageDataMissing(f"{TEMPLATES / name}: amibuild's own template is missing; the installation is "
                                 "incomplete: reinstall amibuild") from exc
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        raise TemplateError(f"{TEMPLATES / name}{':' + str(line) if line else ''}: {exc}") from exc


def variable_block(var: PackerVariable) -> hcl.Block:
    block = hcl.Block("variable", (var.name,)).attr("type", hcl.Expr(var.type)).attr("default", var.default)
    if var.sensitive:
        block.attr("sensitive", True)
    return block


def indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())
