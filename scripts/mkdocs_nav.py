"""MkDocs hook: every page under docs/ is in the nav, the ones mkdocs.yml lists and the ones it does not.

A page mkdocs.yml's nav does not name is added, titled by its `# Title`, to a section by its name:
sandbox-*.md to "The sandbox", dev/*.md to "Development", any other to "More" (an empty section is
dropped). So a new page needs no edit to mkdocs.yml to appear; listing it there places it.
"""

from __future__ import annotations

from pathlib import Path

SECTIONS = (("sandbox-", "The sandbox"), ("dev/", "Development"), ("", "More"))


def _listed(nav) -> set[str]:
    found: set[str] = set()
    for item in nav or []:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            found |= _listed(value)
        elif isinstance(value, str):
            found.add(value)
    return found


def on_config(config):
    nav = config["nav"]
    if not nav:
        return config
    docs = Path(config["docs_dir"])
    listed = _listed(nav)
    sections = {next(iter(item)): item for item in nav if isinstance(item, dict)}
    for page in sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md")):
        if page in listed:
            continue
        title = next(name for prefix, name in SECTIONS if page.startswith(prefix))
        entry = sections.get(title)
        if entry is None:
            entry = sections[title] = {title: []}
            nav.append(entry)
        entry[title].append(page)
    config["nav"] = [item for item in nav if not (isinstance(item, dict) and next(iter(item.values())) == [])]
    return config
