"""Joint-space and task-space controllers of the manip stack."""
