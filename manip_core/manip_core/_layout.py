"""Packing of a compiled model into two flat arrays, the only model arguments of the numba kernels.

Passing two arrays instead of a dozen keeps the cost of a kernel call from Python low (each array argument
costs about 50 ns to unbox). Layout:

``mi`` (int64): [n_bodies, dof, tip_body, has_map, then per body: parent, joint_type, axis_kind, then the
length of the tip's path and its bodies from the base side]
``mf`` (float64): per body BODY_STRIDE floats (see the O_* offsets), then the tip offset (R row-major 9,
p 3) in the tip body's frame, then A (n_bodies x dof, row-major) and b (n_bodies) of q_phys = A q + b.

Per body i: R_X, p_X: pose of joint i's frame in the parent body's frame at q = 0; axis: unit joint axis in
that frame; mass m (kg), h = m * c (kg*m, c the centre of mass in the body frame), Ibar: rotational inertia
about the body frame origin in body axes (kg*m^2), i.e. I_com - m [c]^2.
"""
MI_HEADER = 4
MI_STRIDE = 3
BODY_STRIDE = 28
O_R, O_P, O_AX, O_M, O_H, O_I = 0, 9, 12, 15, 16, 19

JOINT_REVOLUTE, JOINT_PRISMATIC = 0, 1
# axis_kind: 0, 1, 2: the axis is +x, +y, +z; 3: any other direction (general Rodrigues path).
AXIS_GENERAL = 3

# Per-body workspace (floats): R_rel 9, p_rel 3, R_abs 9, p_abs 3, V 6, A 6, F 6, S 6.
W_RREL, W_PREL, W_RABS, W_PABS, W_V, W_A, W_F, W_S = 0, 9, 12, 21, 24, 30, 36, 42
WS_STRIDE = 48
