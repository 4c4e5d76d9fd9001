#!/usr/bin/python3
"""Ansible module: install packages with their units masked meanwhile, in one step. The work is
its action plugin's (action_plugins/slurm_install.py); this file is its documentation and its
argument spec."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_install
short_description: Install packages without letting their postinst start the units named
description:
  - Masks each unit of O(masked_units), installs O(packages) with C(ansible.builtin.apt)
    (no recommends), then unmasks the units and reloads systemd, also when the install fails.
    A daemon then first starts configured, by the role that configures it.
  - One step instead of four tasks, each of which costs the control side a step on every host.
    Each part is Ansible's own module, run by the action plugin, with its idempotence and its
    check mode.
  - Given O(sets) instead, it reads which of their packages the host holds (C(dpkg-query), in
    the same step, in check mode too), plans the transaction with the filter
    C(slurm_install_plan) (what is missing, the units of the sets that have something to
    install, what the host then holds) and installs it. Where that fails and an optional set
    had something to install, it installs the required sets alone, with a warning; the
    optional set's role reports its own failure.
  - Runs only through its action plugin; this module's own code only refuses.
options:
  packages:
    description: The packages to install (or give O(sets)); empty installs nothing and masks
      nothing.
    type: list
    elements: str
  sets:
    description: Each role's package set, for one transaction (or give O(packages)).
    type: list
    elements: dict
    suboptions:
      packages:
        description: The set's packages.
        type: list
        elements: str
      units:
        description: The units masked while the set installs, where it has something to install.
        type: list
        elements: str
      absent:
        description: Packages the set's role removes where the host holds them; those held are
          in the fact, so that the role removes only those.
        type: list
        elements: str
      optional:
        description: Whether the cluster goes on without the set.
        type: bool
        default: false
  masked_units:
    description: With O(packages), the units (without C(.service)) masked while they install.
    type: list
    elements: str
    default: []
  cache_valid_time:
    description: Update apt's cache first where it is older than this many seconds.
    type: int
    default: 86400
  installed:
    description:
      - What the host holds once the packages are installed (those it held before included),
        set as its fact C(slurm_common_installed_packages) where the install succeeds or there
        is nothing to install. Default O(packages). With O(sets), the plan's.
    type: list
    elements: str
    default: []
author: slurm-app-bundle
"""

EXAMPLES = r"""
- name: Install slurmd, which first starts configured
  slurm_install:
    packages: [slurmd]
    masked_units: [slurmd]

- name: Install every role's set in one transaction, monitoring's optional
  slurm_install:
    sets:
      - {packages: [munge, slurm-client]}
      - {packages: [slurmd], units: [slurmd]}
      - {packages: [prometheus-node-exporter], units: [prometheus-node-exporter], optional: true}
"""

RETURN = r"""
msg:
  description: apt's message, or why nothing was installed.
  returned: always
  type: str
cache_updated:
  description: Whether apt's cache was updated.
  returned: when packages were given
  type: bool
ansible_facts:
  description: slurm_common_installed_packages, what the host holds.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "packages": {"type": "list", "elements": "str"},
            "sets": {
                "type": "list",
                "elements": "dict",
                "options": {
                    "packages": {"type": "list", "elements": "str"},
                    "units": {"type": "list", "elements": "str"},
                    "absent": {"type": "list", "elements": "str"},
                    "optional": {"type": "bool", "default": False},
                },
            },
            "masked_units": {"type": "list", "elements": "str", "default": []},
            "cache_valid_time": {"type": "int", "default": 86400},
            "installed": {"type": "list", "elements": "str", "default": []},
        },
        required_one_of=[("packages", "sets")],
        mutually_exclusive=[("packages", "sets")],
        supports_check_mode=True,
    )
    module.fail_json(msg="slurm_install runs through its action plugin (the role's action_plugins)")


if __name__ == "__main__":
    main()
