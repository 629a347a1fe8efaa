"""Pick-and-place state machine with plain-Python fakes that record calls (no ROS)."""
from types import SimpleNamespace

import numpy as np
import pytest

from manip_planning import pick_place_machine as ppm
from manip_planning.collision import Obstacle
from manip_planning.planning import PATH_CARTESIAN, PATH_JOINT, Planner, PlannerSettings


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        self.t += 0.5
        return self.t


class Fakes:
    """plan/execute/grasp/current_joints that only record; execute jumps to the last point of the plan."""

    def __init__(self, ur5, q0, fail=None):
        self.ur5 = ur5
        self.q = np.array(q0, dtype=float)
        self.calls = []
        self.fail = fail or {}
        self.n_plan = 0
        self.requests = []

    def plan(self, req):
        self.n_plan += 1
        self.calls.append(("plan", req.path_type, req.avoid_obstacles))
        self.requests.append(req)
        if self.fail.get("plan") == self.n_plan:
            return SimpleNamespace(success=False, error_code=-6, message="blocked", trajectory=None)
        if req.goal_joints is not None:
            goal = np.array(req.goal_joints)
        else:  # the Cartesian fake: the nearest IK solution of the pose
            goal = self.ur5.analytic_ik().solve(req.goal_pose, near=req.start)[0][0]
        return SimpleNamespace(success=True, error_code=0, message="ok",
                               trajectory=SimpleNamespace(positions=np.array([req.start, goal])))

    def execute(self, traj):
        self.calls.append(("execute",))
        if self.fail.get("execute"):
            return False, "tracking error"
        if self.fail.get("execute_once"):
            self.fail["execute_once"] = False
            return False, "joint_states went stale"
        self.q = traj.positions[-1].copy()
        return True, "done"

    def grasp(self, attach, name):
        self.calls.append(("grasp", attach, name))
        if self.fail.get("grasp"):
            return False, "nothing within reach", ""
        return True, "ok", name or "cube"

    def current(self):
        return self.q.copy()


def _solve_ik(ur5):
    planner = Planner(ur5, PlannerSettings())

    def solve(T, q_near):
        try:
            return planner.choose_ik(T, q_near), ""
        except Exception as e:   # PlanningError: unreachable
            return None, str(e)
    return solve


def _machine(ur5, demo, fakes, **kw):
    progress = []
    m = ppm.PickPlaceMachine(plan=fakes.plan, execute=fakes.execute, grasp=fakes.grasp,
                             current_joints=fakes.current, solve_ik=_solve_ik(ur5),
                             config=ppm.MachineConfig(home=demo.HOME), clock=FakeClock(),
                             on_progress=lambda *a: progress.append(a), **kw)
    return m, progress


def _goal(demo, pick=None, place=None, **kw):
    T1, T2 = np.eye(4), np.eye(4)
    T1[:3, 3] = demo.PICK if pick is None else pick
    T2[:3, 3] = demo.PLACE if place is None else place
    return ppm.PickPlaceGoal(T1, T2, "cube", **kw)


def test_phases_in_order(ur5, demo):
    f = Fakes(ur5, demo.HOME + 0.1)
    m, progress = _machine(ur5, demo, f)
    out = m.run(_goal(demo))
    assert out.success and out.error_code == ppm.SUCCESSFUL, out.message
    assert out.phase_names == ["HOME", "ABOVE_PICK", "PICK", "ABOVE_PLACE", "PLACE", "HOME"]
    assert len(out.phase_durations) == 6 and all(d > 0 for d in out.phase_durations)
    J, C = PATH_JOINT, PATH_CARTESIAN
    assert f.calls == [
        ("plan", J, True), ("execute",),                                                 # HOME
        ("plan", J, True), ("execute",),                                                 # ABOVE_PICK
        ("plan", C, False), ("execute",), ("grasp", True, "cube"), ("plan", C, False), ("execute",),   # PICK
        ("plan", J, True), ("execute",),                                                 # ABOVE_PLACE
        ("plan", C, False), ("execute",), ("grasp", False, "cube"), ("plan", C, False), ("execute",),  # PLACE
        ("plan", J, True), ("execute",),                                                 # HOME
    ]
    assert np.allclose(f.q, demo.HOME)
    # progress: phases in order, non-decreasing, ends at 1
    values = [p for _, p, _ in progress]
    assert values == sorted(values) and values[-1] == 1.0
    assert [ph for ph, _, _ in progress][:3] == ["HOME", "ABOVE_PICK", "PICK"]
    # the solutions checked before moving point the tool down above pick and place
    for key, p in (("above_pick", demo.PICK), ("pick", demo.PICK), ("above_place", demo.PLACE)):
        T = ur5.fk(m.solutions[key])
        assert np.allclose(T[:3, 2], [0, 0, -1], atol=1e-9)
        assert np.allclose(T[:2, 3], p[:2], atol=1e-9)


def test_unreachable_pick_is_rejected_before_any_motion(ur5, demo):
    f = Fakes(ur5, demo.HOME)
    m, _ = _machine(ur5, demo, f)
    out = m.run(_goal(demo, pick=[1.5, 0.0, 0.02]))
    assert out.error_code == ppm.UNREACHABLE
    assert "pick" in out.message and "reachable" in out.message
    assert f.calls == []                  # nothing planned, executed or grasped
    assert out.phase_names == []


def test_unreachable_place_is_rejected_before_any_motion(ur5, demo):
    f = Fakes(ur5, demo.HOME)
    m, _ = _machine(ur5, demo, f)
    out = m.run(_goal(demo, place=[0.0, 0.02, 0.3]))      # over the base: shoulder singularity region
    assert out.error_code == ppm.UNREACHABLE and "place" in out.message
    assert f.calls == []


def test_place_inside_an_obstacle_is_rejected(ur5, demo):
    f = Fakes(ur5, demo.HOME)
    obstacles = [Obstacle(demo.PICK, [0.04, 0.04, 0.04]),            # the cube itself: ignored
                 Obstacle(demo.PLACE, [0.1, 0.1, 0.1])]
    m, _ = _machine(ur5, demo, f, obstacles=lambda: obstacles)
    out = m.run(_goal(demo))
    assert out.error_code == ppm.UNREACHABLE and "inside an obstacle" in out.message
    assert f.calls == []


def test_invalid_goal(ur5, demo):
    f = Fakes(ur5, demo.HOME)
    m, _ = _machine(ur5, demo, f)
    assert m.run(_goal(demo, approach_height=-0.1)).error_code == ppm.INVALID_GOAL
    bad = _goal(demo)
    bad.pick[0, 3] = np.nan
    assert m.run(bad).error_code == ppm.INVALID_GOAL
    assert f.calls == []


def test_grasp_failure_stops_the_task(ur5, demo):
    f = Fakes(ur5, demo.HOME, fail={"grasp": True})
    m, _ = _machine(ur5, demo, f)
    out = m.run(_goal(demo))
    assert out.error_code == ppm.GRASP_FAILED and "attach" in out.message
    assert out.phase_names == ["HOME", "ABOVE_PICK", "PICK"]
    assert f.calls[-1] == ("grasp", True, "cube")


def test_planning_failure_after_the_grasp_reports_the_held_object(ur5, demo):
    f = Fakes(ur5, demo.HOME, fail={"plan": 4})          # 4th plan (none for the first HOME): above pick -> above place
    m, _ = _machine(ur5, demo, f)
    out = m.run(_goal(demo))
    assert out.error_code == ppm.PLANNING_FAILED
    assert "ABOVE_PLACE" in out.message and "still holding 'cube'" in out.message
    assert out.phase_names[-1] == "ABOVE_PLACE"
    assert f.calls[-1] == ("plan", PATH_JOINT, True)


def test_a_task_that_failed_holding_the_object_is_followed_by_a_place_not_a_pick(ur5, demo):
    """Regression (issue 12: kill -9 of the planner while the cube was held; every later goal failed on the gripper,
    "already holding 'cube'"). The next task gets the held object and places it: a straight lift of the approach
    height from where the arm stopped, with the object attached to the tip in the plan, over to above the place,
    down, release, retreat, home (config.home None: where the lift ended); no attach, the goal's pick pose unused."""
    cube = Obstacle(np.asarray(demo.PICK), np.full(3, 0.04))
    f = Fakes(ur5, demo.HOME, fail={"plan": 4})          # the first task fails on its way to above the place
    m, _ = _machine(ur5, demo, f, obstacles=lambda: [cube])
    out = m.run(_goal(demo))
    assert out.error_code == ppm.PLANNING_FAILED and "still holding 'cube'" in out.message
    held = m.held_object
    assert held.name == "cube" and held.shape is not None
    # the cube measured at the grasp: 3 cm below the tip, 2 cm half extents (Shape in the tip frame)
    np.testing.assert_allclose(held.shape.dims, [0.02] * 3)
    np.testing.assert_allclose((ur5.fk(m.solutions["pick"]) @ held.shape.T)[:3, 3], demo.PICK, atol=1e-9)
    q_stop = f.q.copy()
    f.fail, f.calls, f.requests = {}, [], []
    told = []
    m2 = ppm.PickPlaceMachine(plan=f.plan, execute=f.execute, grasp=f.grasp, current_joints=f.current,
                              solve_ik=_solve_ik(ur5), config=ppm.MachineConfig(home=None), clock=FakeClock(),
                              obstacles=lambda: [], tip_pose=ur5.fk, announce=lambda *a: told.append(a[0]))
    out = m2.run(_goal(demo, pick=[5.0, 5.0, 5.0]), held=held)      # an unreachable pick pose: not used
    assert out.success, out.message
    assert out.message.startswith("placed 'cube', held from an earlier task (no pick)")
    assert out.phase_names == ["ABOVE_PLACE", "PLACE", "HOME"]
    J, C = PATH_JOINT, PATH_CARTESIAN
    assert f.calls == [
        ("plan", C, False), ("execute",), ("plan", J, True), ("execute",),                # lift, above the place
        ("plan", C, False), ("execute",), ("grasp", False, "cube"), ("plan", C, False), ("execute",),   # PLACE
        ("plan", J, True), ("execute",),                                                 # HOME
    ]
    lift = f.requests[0]
    T_stop = ur5.fk(q_stop)
    np.testing.assert_allclose(lift.goal_pose[:3, 3], T_stop[:3, 3] + [0.0, 0.0, 0.10], atol=1e-12)
    np.testing.assert_allclose(lift.goal_pose[:3, :3], T_stop[:3, :3], atol=1e-12)
    # held: attached in every plan until the release, then allowed at the place on the way home
    assert [r.attached_object is held.shape for r in f.requests] == [True, True, True, False, False]
    home_req = f.requests[-1]
    assert len(home_req.allowed_objects) == 1
    np.testing.assert_allclose(home_req.allowed_objects[0].center, demo.PLACE + [0.0, 0.0, 0.005], atol=1e-9)
    # home: where the lift ended (the tip 10 cm above where the first task stopped)
    np.testing.assert_allclose(ur5.fk(f.q)[:3, 3], T_stop[:3, 3] + [0.0, 0.0, 0.10], atol=1e-9)
    assert told[0] == "held" and told[-1] == "none" and m2.held_object is None


def test_a_goal_for_another_object_while_one_is_held_is_refused(ur5, demo):
    f = Fakes(ur5, demo.HOME)
    m, _ = _machine(ur5, demo, f, tip_pose=ur5.fk)
    out = m.run(_goal(demo), held=ppm.HeldObject("sphere"))
    assert out.error_code == ppm.INVALID_GOAL and f.calls == []
    assert "still holds 'sphere'" in out.message and "send a goal for 'sphere'" in out.message
    assert m.held_object == ppm.HeldObject("sphere")          # still held: the next goal is told again


def test_execution_failure(ur5, demo):
    f = Fakes(ur5, demo.HOME + 0.1, fail={"execute": True})
    m, _ = _machine(ur5, demo, f)
    out = m.run(_goal(demo))
    assert out.error_code == ppm.EXECUTION_FAILED and "tracking error" in out.message
    assert "1 re-planned retries" in out.message
    assert out.phase_names == ["HOME"]
    assert f.calls == [("plan", PATH_JOINT, True), ("execute",)] * 2


def test_failed_execution_is_replanned_and_retried_once(ur5, demo):
    f = Fakes(ur5, demo.HOME + 0.1, fail={"execute_once": True})
    m, _ = _machine(ur5, demo, f)
    out = m.run(_goal(demo))
    assert out.success and "retried" in out.message and "stale" in out.message
    assert f.calls[:4] == [("plan", PATH_JOINT, True), ("execute",), ("plan", PATH_JOINT, True), ("execute",)]


def test_cancel_during_pick(ur5, demo):
    f = Fakes(ur5, demo.HOME)
    m, _ = _machine(ur5, demo, f)

    def on_progress(phase, progress, text):
        if phase == "PICK" and text == "lift":
            m.cancel()
    m._progress_cb = on_progress
    out = m.run(_goal(demo))
    assert out.error_code == ppm.CANCELED and "PICK" in out.message
    assert f.calls[-1] == ("grasp", True, "cube")      # nothing after the cancel
    assert out.phase_names == ["HOME", "ABOVE_PICK", "PICK"]


def test_already_at_home_plans_nothing_for_the_first_home(ur5, demo):
    """Starting at home: the first HOME phase runs (it is reported) but asks the planner nothing."""
    f = Fakes(ur5, demo.HOME)
    m, _ = _machine(ur5, demo, f)
    out = m.run(_goal(demo))
    assert out.success and out.phase_names[0] == "HOME"
    assert f.calls[:2] == [("plan", PATH_JOINT, True), ("execute",)] and len(f.calls) == 16   # from ABOVE_PICK on


@pytest.mark.parametrize("yaw", [0.0, 0.7])
def test_tool_yaw_follows_the_object(ur5, demo, yaw):
    T = np.eye(4)
    c, s = np.cos(yaw), np.sin(yaw)
    T[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    T[:3, 3] = demo.PICK
    P = ppm.tool_down_pose(T, 0.03)
    assert np.allclose(P[:3, 2], [0, 0, -1]) and np.allclose(P[:3, 0], [c, s, 0])
    assert P[2, 3] == pytest.approx(demo.PICK[2] + 0.03)


def test_demo_task_with_the_real_planner(ur5, demo):
    """The whole task in the demo scene with the library planner (plan = Planner.plan with the pillar):
    every trajectory keeps the safety margin from the pillar (independent check), the tool ends up where
    it should at grasp and release, and the robot returns home."""
    planner = Planner(ur5, PlannerSettings(safety_margin=0.03, link_radius=0.06))
    pillar = [Obstacle(demo.PILLAR_CENTER, demo.PILLAR_SIZE)]
    f = Fakes(ur5, demo.HOME)
    trajectories, results = [], []

    def plan(req):
        res = planner.plan(req, pillar)
        results.append(res)
        return res

    def execute(traj):
        trajectories.append(traj)
        f.q = traj.positions[-1].copy()
        return True, "done"

    tool_at_grasp = []

    def grasp(attach, name):
        tool_at_grasp.append(ur5.fk(f.q)[:3, 3])
        return True, "ok", "cube"

    m = ppm.PickPlaceMachine(plan=plan, execute=execute, grasp=grasp, current_joints=f.current,
                             solve_ik=_solve_ik(ur5), config=ppm.MachineConfig(home=demo.HOME))
    out = m.run(_goal(demo))
    assert out.success, out.message
    assert len(trajectories) == 7              # none for the first HOME: the task starts there
    clearance = min(demo.arm_box_clearance(ur5, demo.interpolate(t.positions), demo.PILLAR_CENTER, demo.PILLAR_SIZE)
                    for t in trajectories)
    assert clearance >= 0.03
    assert min(r.min_obstacle_distance for r in results) >= 0.03
    assert np.allclose(tool_at_grasp[0], demo.PICK + [0, 0, 0.03], atol=1e-6)
    assert np.allclose(tool_at_grasp[1], demo.PLACE + [0, 0, 0.035], atol=1e-6)
    assert np.allclose(f.q, demo.HOME)
    print(f"demo task: min clearance to the pillar {clearance:.3f} m (capsules of 0.06 m), methods "
          f"{[r.method for r in results]}, total motion time {sum(t.duration for t in trajectories):.1f} s")
