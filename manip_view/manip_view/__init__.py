"""manip_view: a browser viewer of a manipulator (viser). No ROS import in the library modules.

geometry (URDF shapes, skeleton capsules), scene (link poses, readout, camera of a RobotModel), camera (pinhole
projection), app (viser glue), browser (headless Chromium over the DevTools protocol, for tests and screenshots),
cli (``manip-view``)."""
