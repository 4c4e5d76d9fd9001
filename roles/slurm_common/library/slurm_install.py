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
  - Runs only through its action plugin; this module's own code only refuses.
options:
  packages:
    description: The packages to install; empty installs nothing and masks nothing.
    type: list
    elements: str
    required: true
  masked_units:
    description: The units (without C(.service)) masked while the packages install.
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
        is nothing to install. Default O(packages).
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
            "packages": {"type": "list", "elements": "str", "required": True},
            "masked_units": {"type": "list", "elements": "str", "default": []},
            "cache_valid_time": {"type": "int", "default": 86400},
            "installed": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="slurm_install runs through its action plugin (the role's action_plugins)")


if __name__ == "__main__":
    main()
