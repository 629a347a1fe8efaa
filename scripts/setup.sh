#!/usr/bin/env bash
# Create or refresh the workspace virtual environment (.venv at the repository root).
#
#   scripts/setup.sh                       # what `make setup` runs
#   scripts/setup.sh --force               # redo every step even if its stamp is current (or SETUP_FORCE=1)
#   scripts/setup.sh --freeze-constraints  # rewrite constraints.txt from the current .venv
#
# Steps (each one is skipped when the hash of its inputs matches the stamp under .venv/.manip-setup/):
#   1. python3 -m venv .venv                     (only if .venv/bin/python is missing)
#   2. pip install -r requirements.txt -r requirements-test.txt -c constraints.txt
#   3. /opt/python/cp311-cp311/... links + cmake build/install of manip_msgs into .venv
#   3b. cmake build/install into .venv of the published interface packages that are not wheels
#      (third_party/ros_interfaces/: control_msgs, tf2_msgs; colcon ignores them, see its README.md)
#   4. pip install -e (no deps, no build isolation, editable_mode=compat) of every ament_python
#      package, plus its data_files (ament index marker, package.xml) under .venv/share
#   5. check that `import rclpy, manip_msgs.msg, manip_core` works in .venv
#   6. scripts/warm_numba.py (two processes): numba compiles every cache=True kernel once into its on-disk
#      cache, so that test and node processes load them instead of compiling (redone when a file of the
#      packages that uses numba, the script or the requirements change; a failure only warns)
# Environment: PYTHON (interpreter that creates the venv, default python3, must be 3.11),
#              SETUP_JOBS (make -j, default 2), SETUP_VERBOSE=1 (show pip/cmake output), SETUP_FORCE=1,
#              SETUP_WARM_NUMBA=0 (skip step 6).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
PY="$VENV/bin/python"
STAMPS="$VENV/.manip-setup"
BUILD="$ROOT/build"
PYTHON="${PYTHON:-python3}"
JOBS="${SETUP_JOBS:-2}"
VERBOSE="${SETUP_VERBOSE:-0}"
FORCE="${SETUP_FORCE:-0}"
PACKAGES=(manip_core manip_planning manip_control manip_perception manip_sim manip_design manip_view)
REQ_FILES=(requirements.txt requirements-test.txt constraints.txt)
# Published interface packages missing from PyPI, built into .venv only (third_party/COLCON_IGNORE).
THIRD_PARTY_MSGS=(control_msgs tf2_msgs)
# Paths baked into the CMake exports of the ros-* wheels (the machine they were built on).
OPT_INCLUDE=/opt/python/cp311-cp311/include/python3.11
OPT_NUMPY=/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy

log() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }

# Run a command; its output goes to a log file (shown on failure) unless SETUP_VERBOSE=1.
run_logged() {
    local logfile="$1"; shift
    if [ "$VERBOSE" = 1 ]; then "$@"; return; fi
    mkdir -p "$(dirname "$logfile")"
    if ! "$@" >"$logfile" 2>&1; then
        tail -n 40 "$logfile" >&2
        die "command failed: $* (full log: ${logfile#"$ROOT"/})"
    fi
}

# sha256 over names and contents of the given files (missing files hash as "missing").
hash_files() {
    local f
    for f in "$@"; do
        printf '%s\n' "$f"
        if [ -f "$f" ]; then sha256sum <"$f"; else echo missing; fi
    done | sha256sum | cut -d' ' -f1
}

stamp_ok() { [ "$FORCE" != 1 ] && [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
write_stamp() { mkdir -p "$STAMPS" && printf '%s\n' "$2" >"$STAMPS/$1"; }

# ensure_link TARGET LINK [SAME_FILE]: make LINK a symlink to TARGET. A link that already points to
# TARGET, or (given SAME_FILE, a path relative to TARGET) to a copy with an identical SAME_FILE
# (e.g. the same numpy in another checkout's venv), is left alone.
ensure_link() {
    local target="$1" link="$2" same="${3:-}" old
    [ -e "$target" ] || die "link target $target does not exist"
    if [ -L "$link" ]; then
        old="$(readlink -f "$link" || true)"
        [ "$old" = "$(readlink -f "$target")" ] && return 0
        if [ -n "$same" ] && [ -n "$old" ] && cmp -s "$old/$same" "$target/$same"; then
            log "keeping $link -> $old (same $same as $target)"
            return 0
        fi
        log "relinking $link -> $target (was -> ${old:-dangling})"
    elif [ -e "$link" ]; then
        die "$link exists and is not a symlink; move it away (it must point to $target)"
    else
        log "linking $link -> $target"
    fi
    if ! { mkdir -p "$(dirname "$link")" && ln -sfn "$target" "$link"; } 2>/dev/null; then
        die "cannot create the symlink $link -> $target (no write access to $(dirname "$link")?).
  The CMake files of the ros-* wheels name that path. Create it once as root:
    sudo mkdir -p '$(dirname "$link")' && sudo ln -sfn '$target' '$link'"
    fi
}

freeze_constraints() {
    [ -x "$PY" ] || die "no .venv to freeze; run scripts/setup.sh first"
    "$PY" - "$ROOT/constraints.txt" <<'EOF'
import importlib.metadata as md
import sys

skip = set()
lines = {}
for dist in md.distributions():
    name = dist.metadata['Name']
    key = name.lower().replace('_', '-')
    path = str(getattr(dist, '_path', ''))
    direct = dist.read_text('direct_url.json') or ''
    # *.egg-info entries are metadata bundled inside the ros-* wheels (not installable on their
    # own); editable installs and manip_* are the workspace's own packages.
    if path.endswith('.egg-info') or '"editable": true' in direct or key.startswith('manip-'):
        continue
    lines[key] = f'{name}=={dist.version}'
with open(sys.argv[1], 'w') as out:
    out.write('# Exact versions of every distribution in the reference .venv (direct and transitive).\n'
              '# Used as: pip install -r requirements.txt -r requirements-test.txt -c constraints.txt\n'
              '# Regenerate from a working .venv with: scripts/setup.sh --freeze-constraints\n')
    for key in sorted(lines):
        out.write(lines[key] + '\n')
print(f'setup: wrote {len(lines)} pins to {sys.argv[1]}')
EOF
}

case "${1:-}" in
    "") ;;
    --force) FORCE=1 ;;
    --freeze-constraints) freeze_constraints; exit 0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
esac

# One setup at a time per checkout (several people share the tree and its .venv).
mkdir -p "$BUILD"
# colcon (lab machines) must not pick up the ament_cmake_python setup.py generated under build/.
[ -e "$BUILD/COLCON_IGNORE" ] || : >"$BUILD/COLCON_IGNORE"
if command -v flock >/dev/null 2>&1; then
    exec 9>>"$BUILD/.setup.lock"
    flock -n 9 || { log "another setup is running in this checkout; waiting for it"; flock 9; }
fi

# ---- 1. virtual environment -----------------------------------------------------------------
created=0
if [ ! -x "$PY" ]; then
    command -v "$PYTHON" >/dev/null 2>&1 || die "'$PYTHON' not found (set PYTHON=/path/to/python3.11)"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
        || die "$PYTHON is $("$PYTHON" -V 2>&1); the ros-* wheels need CPython 3.11 (set PYTHON=...)"
    log "creating .venv with $PYTHON -m venv ($("$PYTHON" -V 2>&1))"
    "$PYTHON" -m venv "$VENV"
    created=1
fi
pyver="$("$PY" -c 'import sys; print(sys.version.split()[0])')" || die ".venv/bin/python does not run; remove .venv and rerun"
case "$pyver" in 3.11.*) ;; *) die ".venv has Python $pyver; the ros-* wheels need 3.11 (remove .venv, set PYTHON=...)" ;; esac

# ---- stamp keys -----------------------------------------------------------------------------
self_hash="$(hash_files scripts/setup.sh)"
req_key="$(printf '%s %s %s' "$pyver" "$self_hash" "$(hash_files "${REQ_FILES[@]}")" | sha256sum | cut -d' ' -f1)"
mapfile -t msg_files < <(find manip_msgs -type f \( -name '*.msg' -o -name '*.srv' -o -name '*.action' \
    -o -name CMakeLists.txt -o -name package.xml \) -not -path '*/.*' | LC_ALL=C sort)
[ "${#msg_files[@]}" -gt 0 ] || die "manip_msgs/ has no interface files"
msgs_key="$(printf '%s %s' "$req_key" "$(hash_files "${msg_files[@]}")" | sha256sum | cut -d' ' -f1)"
declare -A pkg_key
for p in "${PACKAGES[@]}"; do
    [ -f "$p/setup.py" ] || die "$p/setup.py is missing"
    pkg_key[$p]="$(printf '%s %s' "$self_hash" "$(hash_files "$p/setup.py" "$p/setup.cfg" "$p/package.xml" "$p/resource/$p")" | sha256sum | cut -d' ' -f1)"
done
declare -A tp_key
for p in "${THIRD_PARTY_MSGS[@]}"; do
    mapfile -t tp_files < <(find "third_party/ros_interfaces/$p" -type f -not -path '*/.*' | LC_ALL=C sort)
    [ "${#tp_files[@]}" -gt 0 ] || die "third_party/ros_interfaces/$p is missing"
    tp_key[$p]="$(printf '%s %s' "$req_key" "$(hash_files "${tp_files[@]}")" | sha256sum | cut -d' ' -f1)"
done
all_key="$(printf '%s %s %s %s' "$req_key" "$msgs_key" "${pkg_key[*]}" "${tp_key[*]}" | sha256sum | cut -d' ' -f1)"
# numba's cache holds one entry per kernel source file (invalidated by that file's time stamp and size)
mapfile -t numba_files < <(grep -rl --include='*.py' -e numba "${PACKAGES[@]}" \
    | grep -v '/test/' | LC_ALL=C sort)
numba_key="$(printf '%s %s' "$req_key" "$(hash_files scripts/warm_numba.py "${numba_files[@]}")" | sha256sum | cut -d' ' -f1)"

# ---- 6. numba cache (after the venv is complete; called from the end and from the up-to-date exit) ----
warm_numba_cache() {
    if [ "${SETUP_WARM_NUMBA:-1}" = 0 ]; then log "numba cache: skipped (SETUP_WARM_NUMBA=0)"; return 0; fi
    if stamp_ok numba "$numba_key"; then log "numba cache: up to date"; return 0; fi
    log "compiling the numba kernels into their cache (scripts/warm_numba.py, two processes; minutes, once)"
    # numba keys each kernel's cache entry on its own file only: a kernel that calls (inlines) a changed kernel of
    # another file would keep its old machine code. A changed key therefore starts from an empty cache.
    find "${PACKAGES[@]}" -path '*/__pycache__/*' \( -name '*.nbi' -o -name '*.nbc' \) -delete
    mkdir -p "$BUILD/logs"
    local t0=$SECONDS a b ok=1
    "$PY" scripts/warm_numba.py --only core analysis >"$BUILD/logs/warm-numba-1.log" 2>&1 & a=$!
    "$PY" scripts/warm_numba.py --only planning perception design control >"$BUILD/logs/warm-numba-2.log" 2>&1 & b=$!
    wait "$a" || ok=0
    wait "$b" || ok=0
    if [ "$ok" = 1 ]; then
        write_stamp numba "$numba_key"
        log "numba cache: filled in $((SECONDS - t0))s"
    else
        tail -n 30 "$BUILD/logs/warm-numba-1.log" "$BUILD/logs/warm-numba-2.log" >&2
        log "WARNING: scripts/warm_numba.py failed (logs: build/logs/warm-numba-*.log); the kernels it did not" \
            "reach compile in the first process that calls them"
    fi
}

site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ "$created" = 0 ] && stamp_ok verified "$all_key" && [ -d "$site/manip_msgs" ] && [ -d "$site/control_msgs" ]; then
    warm_numba_cache
    log "nothing to do: .venv is up to date (requirements, manip_msgs, ${#PACKAGES[@]} packages; --force redoes everything)"
    exit 0
fi
rm -f "$STAMPS/verified"

# ---- 2. pinned requirements -----------------------------------------------------------------
if stamp_ok requirements "$req_key"; then
    log "pinned requirements: up to date"
else
    log "installing pinned requirements (a new venv downloads ~1 GB of wheels: can take several minutes)"
    pip_q=(-q); [ "$VERBOSE" = 1 ] && pip_q=()
    run_logged "$BUILD/logs/pip-bootstrap.log" \
        "$PY" -m pip install "${pip_q[@]}" --disable-pip-version-check -c constraints.txt pip setuptools wheel
    run_logged "$BUILD/logs/pip-requirements.log" \
        "$PY" -m pip install "${pip_q[@]}" --disable-pip-version-check \
        -r requirements.txt -r requirements-test.txt -c constraints.txt
    write_stamp requirements "$req_key"
fi

# ---- 3. manip_msgs (ament_cmake + rosidl, built with CMake, installed into .venv) ------------
if stamp_ok manip_msgs "$msgs_key" && [ -d "$site/manip_msgs" ]; then
    log "manip_msgs: up to date"
else
    log "linking the wheels' build-machine paths under /opt/python/cp311-cp311"
    py_include="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
    [ -f "$py_include/Python.h" ] || die "no Python.h in $py_include (this Python has no development headers)"
    [ -d "$site/numpy/_core/include" ] || die "numpy is not installed in .venv ($site/numpy/_core/include missing)"
    ensure_link "$py_include" "$OPT_INCLUDE"
    ensure_link "$site/numpy" "$OPT_NUMPY" version.py

    log "building manip_msgs with cmake (build/manip_msgs, make -j$JOBS install into .venv)"
    # A clean build each time the inputs change: the build dir may come from another checkout/venv.
    rm -rf "$BUILD/manip_msgs"
    run_logged "$BUILD/logs/manip_msgs-configure.log" \
        env CMAKE_PREFIX_PATH="$VENV" AMENT_PREFIX_PATH="$VENV" \
        cmake -S manip_msgs -B "$BUILD/manip_msgs" \
        -DPython3_EXECUTABLE="$PY" -DCMAKE_INSTALL_PREFIX="$VENV" -DBUILD_TESTING=OFF
    run_logged "$BUILD/logs/manip_msgs-build.log" \
        env CMAKE_PREFIX_PATH="$VENV" AMENT_PREFIX_PATH="$VENV" make -C "$BUILD/manip_msgs" -j"$JOBS" install
    write_stamp manip_msgs "$msgs_key"
fi

# ---- 3b. published interface packages that are not wheels (same recipe as manip_msgs) -----------
for p in "${THIRD_PARTY_MSGS[@]}"; do
    if stamp_ok "msgs-$p" "${tp_key[$p]}" && [ -d "$site/$p" ]; then
        log "$p: up to date"
        continue
    fi
    # (the /opt/python links were made by step 3 whenever the requirements changed)
    ensure_link "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" "$OPT_INCLUDE"
    ensure_link "$site/numpy" "$OPT_NUMPY" version.py
    log "building $p (third_party/ros_interfaces/$p) with cmake into .venv (a minute or more on 2 cores)"
    rm -rf "$BUILD/$p"
    run_logged "$BUILD/logs/$p-configure.log" \
        env CMAKE_PREFIX_PATH="$VENV" AMENT_PREFIX_PATH="$VENV" \
        cmake -S "third_party/ros_interfaces/$p" -B "$BUILD/$p" \
        -DPython3_EXECUTABLE="$PY" -DCMAKE_INSTALL_PREFIX="$VENV" -DBUILD_TESTING=OFF
    run_logged "$BUILD/logs/$p-build.log" \
        env CMAKE_PREFIX_PATH="$VENV" AMENT_PREFIX_PATH="$VENV" make -C "$BUILD/$p" -j"$JOBS" install
    write_stamp "msgs-$p" "${tp_key[$p]}"
done

# ---- 4. ament_python packages, editable ------------------------------------------------------
todo=()
for p in "${PACKAGES[@]}"; do
    if stamp_ok "pkg-$p" "${pkg_key[$p]}" && compgen -G "$site/${p}-*.dist-info" >/dev/null; then
        continue
    fi
    todo+=("$p")
done
if [ "${#todo[@]}" -eq 0 ]; then
    log "ament_python packages: up to date"
else
    log "installing editable: ${todo[*]}"
    editable=(); for p in "${todo[@]}"; do editable+=(-e "./$p"); done
    # editable_mode=compat puts each package folder (e.g. ./manip_core) on sys.path through a .pth
    # file, like colcon --symlink-install. The default finder-based mode loses against the outer
    # folder of the same name when Python runs from the repository root (python -m pytest).
    run_logged "$BUILD/logs/pip-editable.log" \
        "$PY" -m pip install --disable-pip-version-check --no-deps --no-build-isolation \
        --config-settings editable_mode=compat "${editable[@]}"
    # setuptools' editable wheels never contain data_files (ament index marker, package.xml, ...);
    # install them into the venv prefix the way a colcon install would.
    for p in "${todo[@]}"; do
        (cd "$p" && run_logged "$BUILD/logs/install-data-$p.log" \
            "$PY" setup.py -q install_data --install-dir "$VENV")
        [ -f "$VENV/share/ament_index/resource_index/packages/$p" ] \
            || die "$p: data_files did not install share/ament_index/resource_index/packages/$p"
        write_stamp "pkg-$p" "${pkg_key[$p]}"
    done
fi

# ---- 5. verify ------------------------------------------------------------------------------
log "verifying: import rclpy, manip_msgs.msg, manip_core, control_msgs.action, tf2_msgs.msg in .venv"
"$PY" - "${PACKAGES[@]}" <<'EOF' || die "the import check failed (output above)"
import importlib, os, sys
import rclpy, manip_msgs.msg, manip_core  # noqa: F401  (the check asked for)
from manip_msgs.msg import RobotModel  # noqa: F401
from manip_msgs.srv import GetRobotModel  # noqa: F401
from control_msgs.action import FollowJointTrajectory  # noqa: F401  (third_party/ros_interfaces)
from tf2_msgs.msg import TFMessage  # noqa: F401
for name in sys.argv[1:]:
    # Must resolve to <repo>/<pkg>/<pkg>, not to the outer folder of the same name.
    mod = importlib.import_module(name)
    inner = os.path.realpath(os.path.join(name, name))
    if inner not in [os.path.realpath(p) for p in mod.__path__]:
        sys.exit(f'{name} resolves to {list(mod.__path__)}, expected {inner}')
EOF
[ -x "$VENV/bin/manip-model" ] || die ".venv/bin/manip-model was not created by the editable install of manip_core"
write_stamp verified "$all_key"
warm_numba_cache
log "done in ${SECONDS}s: .venv is ready (make test, make demo)"
