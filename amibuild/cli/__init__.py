"""cli: the only place that knows command-line flags: tasks, typed options, reports, the program."""
