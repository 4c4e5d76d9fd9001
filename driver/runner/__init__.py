"""Running one operation: inventory, ansible-runner, events and the result."""
