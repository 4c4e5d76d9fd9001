#!/usr/bin/python3
"""Ansible module documentation: slurm_accounts is an action plugin (action_plugins/)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_accounts
short_description: The cluster users' accounts and homes on a member, checked or made in one step
description:
  - An action plugin, which runs slurm_read, slurm_folder, C(ansible.builtin.group) and
    C(ansible.builtin.user) on the host from one step, each module with its own idempotence
    and check mode.
  - O(state=checked) changes nothing. It reads the host's accounts of the users' names (getent)
    and the record of the accounts this bundle created (O(record)), and looks where each home
    goes with slurm_folder in check mode (where O(makes_homes)). It fails with
    C([account_exists]) where the host has an account or group of a user's name that the record
    does not hold, C([config_refused]) where a user's home is not O(home_base)/name (it would
    move), and C([storage_conflict]) where slurm_folder refuses a home's place (a link, another
    uid's folder). Its result's C(recorded) is the record's names.
  - O(state=present) first makes O(files) with slurm_files (the record of the accounts this
    bundle creates, before it creates them). It then makes each user's group (gid, or the uid)
    and account (uid, the group of
    its name, C(/bin/bash), home O(home_base)/name, made with umask 077 where O(makes_homes)),
    then keeps each home its user's alone (mode 0700) with slurm_folder. A refused home fails
    with C([storage_conflict]) naming every path.
  - Supports check mode.
options:
  state:
    description: C(checked) refuses without changing anything; C(present) makes the accounts.
    type: str
    choices: [checked, present]
    required: true
  users:
    description: The cluster users, each with C(name), C(uid) and optionally C(gid).
    type: list
    elements: dict
    required: true
  record:
    description: The file listing the accounts this bundle created, one name per line;
      required with O(state=checked).
    type: path
  home_base:
    description: The folder the homes are in.
    type: path
    required: true
  home_root:
    description: The trusted folder slurm_folder walks from (see slurm_folder's O(root)).
    type: path
    required: true
  makes_homes:
    description: Whether this member makes the homes (on a shared mount only the controller
      does); without, no home is looked at or kept.
    type: bool
    required: true
  accounts:
    description: O(state=present) makes the groups and the users (the roles' C(install) phase).
    type: bool
    default: true
  homes:
    description: O(state=present) keeps each home its user's alone (the C(configure) phase).
    type: bool
    default: true
  files:
    description: O(state=present) makes these slurm_files entries first (see slurm_files'
      O(files); C(src) is not read here), in the same step.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Refuse what would take over the host's own accounts or move a home
  slurm_accounts:
    state: checked
    users: [{name: alice, uid: 20001}]
    record: /var/lib/slurm-app/accounts
    home_base: /home
    home_root: /home
    makes_homes: true
  register: guard

- name: Create the cluster users with the same uid on every member, and keep their homes
  slurm_accounts:
    state: present
    users: [{name: alice, uid: 20001}]
    home_base: /home
    home_root: /home
    makes_homes: true
"""

RETURN = r"""
recorded:
  description: The accounts this bundle recorded as its own (O(state=checked)).
  type: list
  elements: str
  returned: success
"""
