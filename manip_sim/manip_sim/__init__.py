"""PyBullet simulation of the manip stack: robot, joint states and camera images."""
