"""Relay-feedback auto-tuning (Astrom & Hagglund 1984) and the Ziegler-Nichols rules; no rclpy.

Relay experiment: u = u0 + d sign(r - y) (d: relay amplitude). For most plants the loop settles into a limit
cycle at the ultimate frequency, where the plant's phase is -180 deg. With the relay's describing function
N(a) = 4 d / (pi a) (a: amplitude of the output's oscillation), the ultimate gain and period are

    Ku = 4 d / (pi a),   Tu = period of the limit cycle.

Ziegler-Nichols (1942), ultimate-sensitivity ("closed-loop") table:

    rule   Kp        Ti        Td
    P      0.5 Ku    -         -
    PI     0.45 Ku   Tu / 1.2  -
    PID    0.6 Ku    Tu / 2    Tu / 8

and Ki = Kp / Ti, Kd = Kp Td (parallel form, as manip_control.pid uses them). ``tyreus_luyben`` (Kp = Ku/3.2,
Ti = 2.2 Tu, Td = Tu/6.3) is the conservative variant.

On the simulated UR5 the relay's limit cycle is set by the control period (one joint alone is a double
integrator with velocity feedback: only the sample-and-hold adds the lag that makes the phase reach -180 deg),
Tu is 11-24 periods with one period of loop delay, and the classic PID row gives gains that, applied to all
joints at once, left the coupled arm oscillating in our check (growing); the Tyreus-Luyben row settled.
``manip-autotune`` therefore uses tyreus_luyben by default (``--rule pid`` for the classic row) and checks the
gains in a closed-loop simulation with the same delay, saying whether they settled.

On the arm (:func:`relay_joint`), one joint at a time: the other joints hold their position (PD with gravity
compensation); the joint under test gets u = g_j(q) - b_j qd_j + d sign(q0_j - q_j), where b_j (N*m*s/rad)
is a velocity feedback (a drive's velocity loop): a joint with neither friction nor such a loop is a double
integrator, whose phase never crosses -180 deg at one frequency. The identified loop includes b_j, so the
joint's PID gets Kd = Kd_ZN + b_j.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ziegler_nichols", "RelayResult", "relay_feedback", "relay_joint", "tune_arm", "ZN_RULES", "check_gains",
           "write_yaml", "main"]

# rule -> (Kp / Ku, Ti / Tu, Td / Tu); tyreus_luyben: the conservative variant (Tyreus & Luyben 1992)
ZN_RULES = {"p": (0.5, None, None), "pi": (0.45, 1.0 / 1.2, None), "pid": (0.6, 0.5, 0.125),
            "tyreus_luyben": (1.0 / 3.2, 2.2, 1.0 / 6.3)}


def ziegler_nichols(ku, tu, rule="pid"):
    """(Kp, Ki, Kd) of the classic Ziegler-Nichols table from the ultimate gain ku and period tu (s)."""
    if rule not in ZN_RULES:
        raise ValueError(f"rule must be one of {', '.join(ZN_RULES)}, got {rule!r}")
    if not (math.isfinite(ku) and ku > 0 and math.isfinite(tu) and tu > 0):
        raise ValueError(f"ultimate gain and period must be finite and > 0, got Ku={ku}, Tu={tu}")
    c, ti, td = ZN_RULES[rule]
    kp = c * ku
    ki = kp / (ti * tu) if ti else 0.0
    kd = kp * td * tu if td else 0.0
    return kp, ki, kd


@dataclass
class RelayResult:
    """ku: ultimate gain (input unit / output unit); tu: ultimate period (s); amplitude: a (output unit);
    periods: the periods (s) of the cycles measured; t, y, u: the recorded experiment."""

    ku: float
    tu: float
    amplitude: float
    periods: np.ndarray
    t: np.ndarray
    y: np.ndarray
    u: np.ndarray


def relay_feedback(step, setpoint, relay_amplitude, dt, duration, settle_cycles=3, hysteresis=0.0, u0=None):
    """Run a relay experiment on ``step(u) -> y`` (one call advances the plant by dt s and returns its
    output) around ``setpoint``; u0(y) (optional): the bias added to the relay (e.g. gravity compensation).
    The first ``settle_cycles`` cycles, and at least the first half, are skipped; ku and tu come from the
    remaining ones.
    RuntimeError when fewer than 2 cycles are left (no limit cycle)."""
    n = int(round(duration / dt))
    t = np.arange(n) * dt
    y = np.empty(n)
    u = np.empty(n)
    yk = step(0.0 if u0 is None else u0(None))
    sign = 1.0
    for k in range(n):
        e = setpoint - yk
        if e > hysteresis:
            sign = 1.0
        elif e < -hysteresis:
            sign = -1.0
        uk = relay_amplitude * sign + (0.0 if u0 is None else u0(yk))
        y[k], u[k] = yk, uk
        yk = step(uk)
    # upward crossings of the set point by the output (linear interpolation)
    d = y - setpoint
    idx = np.flatnonzero((d[:-1] < 0) & (d[1:] >= 0))
    tc = t[idx] + dt * (-d[idx] / (d[idx + 1] - d[idx]))
    if tc.size < settle_cycles + 3:
        raise RuntimeError(f"relay experiment: only {tc.size} cycles in {duration} s (no limit cycle; try a larger "
                           f"relay amplitude or a longer run)")
    tc = tc[max(settle_cycles, tc.size // 2):]  # the settled half of the cycles
    periods = np.diff(tc)
    seg = (t >= tc[0]) & (t <= tc[-1])
    a = 0.5 * (np.max(y[seg]) - np.min(y[seg]))
    ku = 4.0 * relay_amplitude / (math.pi * a)
    return RelayResult(ku, float(np.mean(periods)), float(a), periods, t, y, u)


def relay_joint(model, joint, q0, relay_amplitude, velocity_feedback, rate_hz=250.0, duration=4.0, plant=None,
                hold_law=None, substeps=4, delay_ticks=1):
    """Relay experiment on one joint of the simulated arm (plant: RobotModel-like with forward_dynamics,
    default ``model``), the others held by ``hold_law`` (default PD with gravity compensation).
    relay_amplitude in N*m, velocity_feedback b_j in N*m*s/rad; delay_ticks: control periods between the
    measurement and the effort taking hold (1: the node's loop, which computes from the joint_states of the
    previous period). Returns RelayResult (ku in N*m/rad)."""
    from .control_laws import PD
    from .simulate import step_plant
    plant = model if plant is None else plant
    hold = PD(model) if hold_law is None else hold_law
    q0 = np.asarray(q0, dtype=np.float64).copy()
    state = {"q": q0.copy(), "qd": np.zeros(model.dof), "queue": [model.gravity_torques(q0)] * delay_ticks}
    dt = 1.0 / rate_hz
    zero = np.zeros(model.dof)

    def step(u_j):
        q, qd = state["q"], state["qd"]
        tau = hold.compute(q, qd, q0, zero, zero).tau.copy()
        tau[joint] = u_j - velocity_feedback * qd[joint]
        lim = model.effort_limits[joint]
        if math.isfinite(lim) and lim > 0:
            tau[joint] = min(max(tau[joint], -lim), lim)
        state["queue"].append(tau)
        state["q"], state["qd"] = step_plant(plant, q, qd, state["queue"].pop(0), dt, substeps)
        return float(state["q"][joint])

    def bias(_y):
        return float(model.gravity_torques(state["q"])[joint])

    return relay_feedback(step, float(q0[joint]), relay_amplitude, dt, duration, u0=bias)


def tune_arm(model, q0, relay_fraction=0.05, rate_hz=250.0, duration=4.0, plant=None, rule="pid",
             bandwidth=10.0, progress=None):
    """Relay + Ziegler-Nichols for every joint of the arm, one at a time, at q0.

    Relay amplitude d_j = relay_fraction * effort limit (N*m); velocity feedback b_j = 2 M_jj(q0) bandwidth
    (N*m*s/rad, bandwidth in rad/s). Returns a list of dicts: joint, ku, tu, amplitude, kp, ki, kd."""
    M = model.mass_matrix(np.asarray(q0, float))
    out = []
    for j, name in enumerate(model.joint_names):
        lim = model.effort_limits[j]
        d = relay_fraction * (lim if math.isfinite(lim) and lim > 0 else 100.0)
        b = 2.0 * M[j, j] * bandwidth
        res = relay_joint(model, j, q0, d, b, rate_hz, duration, plant)
        kp, ki, kd = ziegler_nichols(res.ku, res.tu, rule)
        row = dict(joint=name, ku=res.ku, tu=res.tu, amplitude=res.amplitude, relay=d, velocity_feedback=b,
                   kp=kp, ki=ki, kd=kd + b, rule=rule)
        out.append(row)
        if progress is not None:
            progress(row)
    return out


def check_gains(model, q0, kp, ki, kd, rate_hz=250.0, step_rad=0.002, duration=3.0, plant=None, delay_ticks=1,
                substeps=4):
    """Closed-loop check of PID gains on the simulated arm (same loop delay as the relay experiment): a step
    of step_rad on every joint from q0. Returns (final |error| max (rad), overshoot max (fraction of the
    step), fraction of ticks saturated); inf when the loop diverged."""
    from .pid import PID
    from .simulate import step_plant
    plant = model if plant is None else plant
    q0 = np.asarray(q0, float)
    law = PID(model, kp, ki, kd, period_s=1.0 / rate_hz)
    q, qd = q0.copy(), np.zeros(model.dof)
    target = q0 + step_rad
    queue = [model.gravity_torques(q0)] * delay_ticks
    peak, sat = -np.inf, 0
    steps = int(round(duration * rate_hz))
    for _ in range(steps):
        out = law.compute(q, qd, target, np.zeros(model.dof))
        sat += out.any_saturated
        queue.append(out.tau)
        q, qd = step_plant(plant, q, qd, queue.pop(0), 1.0 / rate_hz, substeps)
        if not np.all(np.isfinite(q)) or np.max(np.abs(q - target)) > 10.0:
            return math.inf, math.inf, 1.0
        peak = max(peak, float(np.max((q - target) / step_rad)))
    return float(np.max(np.abs(q - target))), peak, sat / steps


def write_yaml(path, rows, node_name="controller"):
    """Parameters file for the controller node (--ros-args --params-file PATH): control_law pid, kp, kd,
    pid.ki."""
    def arr(key):
        return "[" + ", ".join(f"{float(r[key]):.6g}" for r in rows) + "]"
    text = (f"# manip-autotune: relay feedback + {rows[0].get('rule', 'pid')} rule; joints "
            f"{', '.join(r['joint'] for r in rows)}\n"
            + "".join(f"#   {r['joint']}: Ku {r['ku']:.6g} N*m/rad, Tu {r['tu']:.6g} s\n" for r in rows)
            + f"{node_name}:\n  ros__parameters:\n    control_law: pid\n"
            f"    kp: {arr('kp')}\n    kd: {arr('kd')}\n    pid:\n      ki: {arr('ki')}\n")
    with open(path, "w") as f:
        f.write(text)
    return text


def main(argv=None):
    """Console script manip-autotune."""
    import argparse
    import sys
    from manip_core import RobotModel
    p = argparse.ArgumentParser(prog="manip-autotune", description="Relay-feedback (Astrom-Hagglund) auto-tuning "
                                "of a per-joint PID on the simulated arm, one joint at a time; Ziegler-Nichols "
                                "gains written as the controller's parameters file.")
    p.add_argument("robot", help="URDF path or bundled robot name (manip_core.robots)")
    p.add_argument("--base-link", default=None)
    p.add_argument("--tip-link", default=None)
    p.add_argument("--q0", type=float, nargs="+", default=None,
                   help="configuration of the experiment, rad (default: zeros clipped to the limits)")
    p.add_argument("--rate-hz", type=float, default=250.0, help="control rate of the experiment (default 250)")
    p.add_argument("--duration", type=float, default=4.0, help="s of relay experiment per joint (default 4)")
    p.add_argument("--relay-fraction", type=float, default=0.05,
                   help="relay amplitude as a fraction of the joint's effort limit (default 0.05)")
    p.add_argument("--rule", default="tyreus_luyben", choices=sorted(ZN_RULES),
                   help="tuning rule: pid is the classic Ziegler-Nichols row, tyreus_luyben its conservative "
                        "variant (default: %(default)s; see the module docstring)")
    p.add_argument("--output", default="autotune_gains.yaml", help="parameters YAML to write")
    p.add_argument("--node-name", default="controller", help="node name in the YAML (default controller)")
    a = p.parse_args(argv)
    try:
        model = RobotModel.load(a.robot, a.base_link, a.tip_link)
        q0 = np.clip(np.zeros(model.dof), model.joint_lower, model.joint_upper) if a.q0 is None else np.array(a.q0)
        if q0.shape != (model.dof,):
            raise ValueError(f"--q0 needs {model.dof} values ({', '.join(model.joint_names)})")
        print(f"manip-autotune: {model.name}, {model.dof} joints, relay experiments at q0 = "
              f"{np.round(q0, 4).tolist()} rad", file=sys.stderr)

        def progress(r):
            print(f"  {r['joint']}: relay {r['relay']:.3g} N*m, velocity feedback {r['velocity_feedback']:.3g} "
                  f"N*m*s/rad -> Ku {r['ku']:.5g} N*m/rad, Tu {r['tu']:.4g} s (oscillation {r['amplitude']:.3g} "
                  f"rad) -> Kp {r['kp']:.5g}, Ki {r['ki']:.5g}, Kd {r['kd']:.5g}", flush=True)
        rows = tune_arm(model, q0, a.relay_fraction, a.rate_hz, a.duration, rule=a.rule, progress=progress)
    except (ValueError, RuntimeError, FileNotFoundError) as e:
        print(f"manip-autotune: error: {e}", file=sys.stderr)
        return 2
    for r in rows:
        r["rule"] = a.rule
    write_yaml(a.output, rows, a.node_name)
    final, over, sat = check_gains(model, q0, [r["kp"] for r in rows], [r["ki"] for r in rows],
                                   [r["kd"] for r in rows], a.rate_hz)
    stable = final < 0.1 * 0.002
    print(f"closed-loop check (2 mrad step on every joint, 3 s): final error {final:.3g} rad, overshoot "
          f"{100 * over:.0f} %, saturated {100 * sat:.0f} % of ticks: {'stable' if stable else 'NOT settled'}")
    if not stable:
        print("manip-autotune: warning: these gains did not settle on the simulated arm; try --rule tyreus_luyben",
              file=sys.stderr)
    print(f"wrote {a.output} (load with: controller --ros-args --params-file {a.output})")
    return 0
