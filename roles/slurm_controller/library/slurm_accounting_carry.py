#!/usr/bin/python3
"""Ansible module: carry the records of jobs across a rollback's restore of the accounting."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_accounting_carry
short_description: Keep the job records made since a backup, and put them back after its restore
description:
  - A rollback loads the accounting database from the upgrade's backup. Accounting is what a
    provider bills from, so the records of the jobs that ran or ended since the backup must
    not be lost or falsified by it.
  - I(state=kept), with slurmdbd stopped and before the load, copies the job and step records
    changed since I(since) (submitted, ended, or not ended) into a database of their own,
    C(slurm_app_rollback_carry), with the highest job id ever recorded. A copy already made for
    the same I(backup_id) is kept as it is, so a rollback run again after it failed past the
    load carries what the first run found; one made for another backup is replaced.
  - I(state=applied), after the load (and after slurmctld ended the jobs the restored queue
    holds that had ended since), puts back each kept job that ended, or that the restored
    database lacks, with its steps, in place of the restored record; a job the restored
    queue still holds keeps its record and gains the steps it ran since. A job submitted since
    that had not ended is gone with the restored queue; its record ends at the rollback as
    cancelled. Slurm's usage roll-ups are made to run again from the backup's hour, and the
    copy is dropped.
  - Columns are carried by name, only those both schemas have (a rollback across a Slurm
    upgrade goes from slurmdbd's converted schema back to the backup's).
  - Check mode reports what it would do and changes nothing.
options:
  state:
    description: C(kept) before the restore, C(applied) after it.
    type: str
    required: true
    choices: [kept, applied]
  database:
    description: The accounting database (slurmdbd's StorageLoc).
    type: str
    required: true
  cluster:
    description: The Slurm cluster's name (its tables are named after it).
    type: str
    required: true
  backup_id:
    description: The backup the rollback restores.
    type: str
    required: true
  since:
    description: The moment the backup's queue is from (its manifest's C(state_from)), UTC.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Keep the records made since the backup
  slurm_accounting_carry:
    state: kept
    database: slurm_acct_db
    cluster: research
    backup_id: 20261205T101500Z
    since: "2026-12-05T10:15:00Z"
  register: kept

- name: Put them back after the restore
  slurm_accounting_carry:
    state: applied
    database: slurm_acct_db
    cluster: research
    backup_id: 20261205T101500Z
"""

RETURN = r"""
highest_job_id:
  description: The highest job id the database recorded before the restore.
  type: int
  returned: state=kept
ended_job_ids:
  description: The jobs that existed at the backup and have ended since (the restored queue
    would hold them again).
  type: list
  elements: str
  returned: state=kept
jobs:
  description: kept, the job records copied; applied, those put back in place of the
    restored ones (new, or ended otherwise than the restored record says).
  type: int
  returned: success
steps:
  description: applied, the step records of those jobs.
  type: int
  returned: state=applied
ended_by_rollback:
  description: applied, the jobs submitted since the backup that had not ended, recorded as
    cancelled at the rollback.
  type: int
  returned: state=applied
"""

import calendar  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

CARRY = "slurm_app_rollback_carry"
NAME = re.compile(r"^[A-Za-z0-9_]+$")
BACKUP_ID = re.compile(r"^[A-Za-z0-9._-]+$")
# Slurm's enum job_states
JOB_CANCELLED = 4
# a record the backup's dump may have caught just before its queue was saved is taken again
SINCE_MARGIN_S = 300


class Carry:
    """The SQL of one cluster's carry, run through the mariadb client as root (the socket)."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        params = module.params
        for field in ("database", "cluster"):
            if not NAME.match(params[field]):
                module.fail_json(msg=f"{field}: letters, digits and _ expected")
        if not BACKUP_ID.match(params["backup_id"]):
            module.fail_json(msg="backup_id: letters, digits, '.', '_' and '-' expected")
        # slurmdbd names a cluster's tables after its name in lower case
        prefix = f"`{params['database']}`.`{params['cluster'].lower()}"
        self.jobs, self.steps = f"{prefix}_job_table`", f"{prefix}_step_table`"
        self.last_ran = f"{prefix}_last_ran_table`"
        self.database, self.cluster = params["database"], params["cluster"].lower()
        self.backup_id = params["backup_id"]

    def rows(self, statements: str) -> list[list[str]]:
        rc, out, err = self.module.run_command(
            ["mariadb", "--batch", "--skip-column-names", "--raw"], data=statements
        )
        if rc != 0:
            self.module.fail_json(msg=f"mariadb: {err.strip()}")
        return [line.split("\t") for line in out.splitlines()]

    def kept(self) -> tuple[str, int, int] | None:
        """The carry on the host: its backup, highest job id and job count; None if none whole
        (the meta table is written last)."""
        found = self.rows(
            "SELECT COUNT(*) FROM information_schema.TABLES"
            f" WHERE TABLE_SCHEMA = '{CARRY}' AND TABLE_NAME = 'meta'"
        )
        if found[0][0] == "0":
            return None
        backup_id, highest, jobs = self.rows(
            f"SELECT backup_id, highest_job_id, jobs FROM `{CARRY}`.meta"
        )[0]
        return backup_id, int(highest), int(jobs)

    def ended_since(self) -> list[str]:
        return [
            row[0]
            for row in self.rows(
                f"SELECT DISTINCT id_job FROM `{CARRY}`.job"
                f" WHERE time_end > 0 AND time_submit < (SELECT backup_at FROM `{CARRY}`.meta)"
                " ORDER BY id_job"
            )
        ]

    def keep(self, since: str) -> dict:
        try:
            moment = calendar.timegm(time.strptime(since, "%Y-%m-%dT%H:%M:%SZ"))
        except ValueError:
            self.module.fail_json(msg="since: a UTC moment as YYYY-MM-DDTHH:MM:SSZ expected")
        kept = self.kept()
        if kept is not None and kept[0] == self.backup_id:
            return {
                "changed": False,
                "highest_job_id": kept[1],
                "jobs": kept[2],
                "ended_job_ids": self.ended_since(),
            }
        if self.module.check_mode:
            return {"changed": True, "highest_job_id": 0, "jobs": 0, "ended_job_ids": []}
        self.rows(
            f"DROP DATABASE IF EXISTS `{CARRY}`; CREATE DATABASE `{CARRY}`;\n"
            f"SET @since = {moment - SINCE_MARGIN_S};\n"
            f"CREATE TABLE `{CARRY}`.job AS SELECT * FROM {self.jobs}"
            " WHERE time_submit >= @since OR time_end >= @since OR time_end = 0;\n"
            f"CREATE TABLE `{CARRY}`.step AS SELECT * FROM {self.steps}"
            f" WHERE job_db_inx IN (SELECT job_db_inx FROM `{CARRY}`.job);\n"
            f"CREATE TABLE `{CARRY}`.meta AS SELECT '{self.backup_id}' AS backup_id,"
            f" @since AS since, {moment} AS backup_at,"
            f" (SELECT COALESCE(MAX(id_job), 0) FROM {self.jobs}) AS highest_job_id,"
            f" (SELECT COUNT(*) FROM `{CARRY}`.job) AS jobs;\n"
        )
        _, highest, jobs = self.kept() or ("", 0, 0)
        return {
            "changed": True,
            "highest_job_id": highest,
            "jobs": jobs,
            "ended_job_ids": self.ended_since(),
        }

    def common_columns(self, carried: str, restored: str) -> list[str]:
        """The columns both the kept table and the restored one have, job_db_inx aside."""
        names = [
            row[0]
            for row in self.rows(
                "SELECT c.COLUMN_NAME FROM information_schema.COLUMNS c"
                " JOIN information_schema.COLUMNS r ON r.COLUMN_NAME = c.COLUMN_NAME"
                f" AND r.TABLE_SCHEMA = '{self.database}' AND r.TABLE_NAME = '{restored}'"
                f" WHERE c.TABLE_SCHEMA = '{CARRY}' AND c.TABLE_NAME = '{carried}'"
                " AND c.COLUMN_NAME <> 'job_db_inx' ORDER BY c.ORDINAL_POSITION"
            )
        ]
        if not names or not all(NAME.match(name) for name in names):
            self.module.fail_json(msg=f"{restored}: no columns in common with the kept records")
        return [f"`{name}`" for name in names]

    def apply(self) -> dict:
        kept = self.kept()
        if kept is None or kept[0] != self.backup_id:
            self.module.fail_json(
                msg=f"no records kept for backup {self.backup_id}: keep them before the restore"
            )
        if self.module.check_mode:
            return {"changed": True, "jobs": kept[2], "steps": 0, "ended_by_rollback": 0}
        job_columns = self.common_columns("job", f"{self.cluster}_job_table")
        step_columns = self.common_columns("step", f"{self.cluster}_step_table")
        jobs, carry_jobs = ", ".join(job_columns), ", ".join(f"c.{c}" for c in job_columns)
        steps, carry_steps = ", ".join(step_columns), ", ".join(f"s.{c}" for c in step_columns)
        same_job = "r.id_job = h.id_job AND r.time_submit = h.time_submit"
        found = self.rows(
            f"USE `{CARRY}`;\n"
            "SET @now = UNIX_TIMESTAMP();\n"
            f"SET @since = (SELECT since FROM `{CARRY}`.meta);\n"
            # what is put back: a job the restored database lacks, or one that ended other
            # than the restored record says (one still in the restored queue keeps its own)
            "CREATE TEMPORARY TABLE chosen AS SELECT c.job_db_inx AS kept_inx, c.id_job,"
            f" c.time_submit, c.time_end FROM `{CARRY}`.job c"
            f" WHERE NOT EXISTS (SELECT 1 FROM {self.jobs} r"
            " WHERE r.id_job = c.id_job AND r.time_submit = c.time_submit)"
            f" OR (c.time_end > 0 AND NOT EXISTS (SELECT 1 FROM {self.jobs} r"
            " WHERE r.id_job = c.id_job AND r.time_submit = c.time_submit"
            " AND r.time_end = c.time_end AND r.state = c.state));\n"
            "START TRANSACTION;\n"
            f"DELETE s FROM {self.steps} s JOIN {self.jobs} r ON s.job_db_inx = r.job_db_inx"
            f" JOIN chosen h ON {same_job};\n"
            f"DELETE r FROM {self.jobs} r JOIN chosen h ON {same_job};\n"
            # under a new index: slurmctld's restored queue still names the old one, and what
            # it writes of a job it ended again must miss the record the job ended with
            f"INSERT INTO {self.jobs} ({jobs}) SELECT {carry_jobs}"
            f" FROM `{CARRY}`.job c JOIN chosen h ON h.kept_inx = c.job_db_inx;\n"
            # the steps of every kept job, under its record's index now
            f"REPLACE INTO {self.steps} (job_db_inx, {steps}) SELECT r.job_db_inx, {carry_steps}"
            f" FROM `{CARRY}`.step s JOIN `{CARRY}`.job c ON c.job_db_inx = s.job_db_inx"
            f" JOIN {self.jobs} r ON r.id_job = c.id_job AND r.time_submit = c.time_submit;\n"
            f"SET @steps = (SELECT COUNT(*) FROM `{CARRY}`.step s"
            " JOIN chosen h ON h.kept_inx = s.job_db_inx);\n"
            # submitted since and not ended: gone with the restored queue, ended now
            f"UPDATE {self.steps} s JOIN {self.jobs} r ON s.job_db_inx = r.job_db_inx"
            f" JOIN chosen h ON {same_job}"
            f" SET s.time_end = @now, s.state = {JOB_CANCELLED}"
            " WHERE h.time_end = 0 AND s.time_end = 0;\n"
            f"UPDATE {self.jobs} r JOIN chosen h ON {same_job}"
            f" SET r.time_end = @now, r.state = {JOB_CANCELLED}"
            " WHERE h.time_end = 0;\n"
            "SET @ended = ROW_COUNT();\n"
            # slurmdbd rolled the hours since the backup up at its start, without these
            "SET @hour = @since - @since % 3600;\n"
            f"UPDATE {self.last_ran} SET hourly_rollup = LEAST(hourly_rollup, @hour),"
            " daily_rollup = LEAST(daily_rollup, @hour),"
            " monthly_rollup = LEAST(monthly_rollup, @hour);\n"
            "COMMIT;\n"
            "SELECT (SELECT COUNT(*) FROM chosen), @steps, @ended;\n"
            f"DROP DATABASE `{CARRY}`;\n"
        )
        carried, steps_count, ended = (int(value) for value in found[-1])
        return {"changed": True, "jobs": carried, "steps": steps_count, "ended_by_rollback": ended}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "required": True, "choices": ["kept", "applied"]},
            "database": {"type": "str", "required": True},
            "cluster": {"type": "str", "required": True},
            "backup_id": {"type": "str", "required": True},
            "since": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    carry = Carry(module)
    if module.params["state"] == "kept":
        module.exit_json(**carry.keep(module.params["since"]))
    module.exit_json(**carry.apply())


if __name__ == "__main__":
    main()
