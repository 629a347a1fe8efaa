"""Motion planning for the manip stack: joint and Cartesian trajectories, collision-aware paths."""
