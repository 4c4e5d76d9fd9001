"""The local container lab: systemd containers standing in for the platform's allocations."""
