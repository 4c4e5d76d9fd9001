"""The app's typed tasks, one module per domain with its declarations beside it.

Each domain is `<domain>.py`, whose TASKS maps a task's name to its handler (and whose AUDITED
names the tasks that write an audit line), and `<domain>.yaml`, the tasks' entries in the app
manifest (`type`, `component_key`, `input_schema`, `output_schema`, ...).
`scripts/manifest_tasks.py` writes the manifest's `tasks` from the .yaml files, in DOMAINS'
order; the task command (slurm_app_task.py) takes the handlers from the .py files.
`core` is what every task shares. docs/design.md, "Add a typed task", is the recipe.
"""

DOMAINS = ("queue", "nodes", "jobs", "output", "usage")
