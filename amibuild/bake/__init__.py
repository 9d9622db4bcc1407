"""build: the plan (skip unchanged), the packer binary and its pure parsers, the executor, progress."""
