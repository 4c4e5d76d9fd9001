"""Ansible strategy plugins the driver runs its playbooks with (ANSIBLE_STRATEGY_PLUGINS)."""
