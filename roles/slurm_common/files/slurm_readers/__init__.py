"""How the bundle asks Slurm about its state and how it reads the answers, by domain:
`versions`, `commands` (what is asked, and how a text answer splits), `nodes`, `jobs`,
`accounting`, plus `gpus` and `hosts` (units, disk sizes) for the workers and teardowns, and
`reports` (what the controller and a worker publish for the driver, from what they read).

One package for every reader: the roles use it through their Ansible filters
(filter_plugins/slurm_output.py), the controller's typed-task command and the monitoring
exporter import it where the roles install it beside them, and the tests read captured answers
with it. It is plain Python 3.9+ with the standard library only, so it runs on any customer host
without pip.

Readers accept either answer: `--json` (stable field names, no quoting problems) or the text
of the formats in `commands`, faster where many jobs are read. The JSON shapes differ across
versions: 22.05 (openapi v0.0.38) gives scalar states and plain numbers; 23.02+ give state
lists and {set, infinite, number} wrappers; per-node records come from `sinfo --json` before
23.02 and from `scontrol show nodes --json` after (24.11's `sinfo --json` groups nodes). Both
are read into the same records.

Slurm prints a job's name and a node's reason as given, newlines and `|` included, so no fixed
character tells a text field from the next. Each text query separates its fields with a
separator of its own (`|`, 24 random hex digits, `|`; new at every call), which no job name
submitted before the call can hold; the reader takes the first one in the answer, which
follows the first record's first field (a job id or node name: Slurm makes those). A record
may then hold newlines anywhere but in its first field. A user who reads the command line in
the process list while the query runs and renames a pending job before slurmctld answers
(milliseconds) could still learn one separator; what that job can then forge is one query's
reading, for that query alone.
"""
