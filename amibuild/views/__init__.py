"""How results read to people: plain-text reports (`report`) and CI summaries (`summary`: Markdown
for ``$GITHUB_STEP_SUMMARY`` and workflow commands).

Each renderer is pure, a result in and text out, reading the result through the fields it carries;
the cli chooses which to print (JSON goes out as data, see `amibuild.cli.run.emit_json`). No stage
imports a view: a view reads the results the stages and the jobs return.
"""
