#!/usr/bin/env bash
# bundle/run.sh (ci/gpu copies this file): the parloop checks on a GPU
# machine with the CUDA driver and toolkit and no Rust. Results go to $OUT
# (default: out/ beside this script).
#
#   run.sh [--dry-run] [--keep-going] [--steps tests,sanitizer,timings,demos,profile]
#
# Steps, in order (the first failure stops the run, with a summary, unless
# --keep-going):
#   tests      the device-path test binaries (tests.list) with
#              PARLOOP_BACKEND=cuda PARLOOP_TEST_DEVICE=cuda PARLOOP_REQUIRE_CUDA=1 PARLOOP_REQUIRE_NVRTC=1:
#              the cuda_* tests fail instead of skipping when the GPU cannot be used
#   sanitizer  compute-sanitizer memcheck over the CUDA tests and a short
#              airfoil run per strategy, racecheck over a staged airfoil run
#   timings    device query and copy bandwidth; airfoil ($GRID, default
#              400,600; $ITERATIONS, default 1000) with each strategy and
#              auto, residuals against the reference; report.md
#   demos      wave and poisson (CG) on cuda and on threads (all cores),
#              airfoil on threads, and the CuPy peer of CG (cupy_cg.py)
#              where CuPy imports; $DEMO_N (default 125) is the unit cube's
#              cells per side for the CG timings
#   profile    NVTX ranges around the kernels: nsys where present, else ncu
#              (--nvtx, kernels renamed after their innermost range): the
#              airfoil, and (ncu) the wave and poisson demos
# --dry-run lists the commands without running anything.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
dry=0
keep_going=0
steps=tests,sanitizer,timings,demos,profile
usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
    case $1 in
        --dry-run) dry=1 ;;
        --keep-going) keep_going=1 ;;
        --steps) steps=${2:?--steps needs a list}; shift ;;
        --steps=*) steps=${1#--steps=} ;;
        -h | --help) usage; exit 0 ;;
        *) echo "run.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
iterations=${ITERATIONS:-1000}
grid=${GRID:-400,600}
strategies=(staged staged-atomic atomic global-colour auto)
failed=()
ran=()

for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
export PARLOOP_CACHE_DIR="$here/cache"
export RUST_BACKTRACE=1
[ "$dry" = 1 ] || mkdir -p "$out/logs"

want() { [[ ,$steps, == *,$1,* ]]; }

summary() {
    echo
    echo "== summary (results in $out)"
    local r
    for r in "${ran[@]}"; do echo "  $r"; done
    if ((${#failed[@]})); then
        echo "FAILED: ${failed[*]}"
    elif [ "$dry" = 1 ]; then
        echo "dry run: nothing was run"
    else
        echo "all passed"
    fi
}

# x NAME LOG CMD...: runs CMD (output to the terminal and LOG), records the
# outcome; stops the run on failure unless --keep-going.
x() {
    local name=$1 log=$2
    shift 2
    if [ "$dry" = 1 ]; then
        printf '+'
        printf ' %q' "$@"
        printf '  > %s\n' "${log#"$here"/}"
        return 0
    fi
    echo "== $name"
    local start=$SECONDS rc=0
    "$@" 2>&1 | tee "$log" || rc=$?
    ran+=("$(printf '%-4s %4ss %s' "$([ $rc = 0 ] && echo ok || echo FAIL)" $((SECONDS - start)) "$name")")
    if [ $rc != 0 ]; then
        failed+=("$name")
        echo "FAILED: $name (exit $rc); log: $log" >&2
        # libtest's list of failing tests, when there is one.
        sed -n '/^failures:$/,/^test result/p' "$log" | grep '^    ' >&2 || true
        if [ "$keep_going" = 0 ]; then
            summary
            exit 1
        fi
    fi
    return 0
}

# The test binaries and their arguments, one a line (written by ci/gpu).
tests=()
while read -r line; do
    [ -n "$line" ] && [ "${line:0:1}" != "#" ] && tests+=("$line")
done <"$here/tests.list"
missing=0
for line in "${tests[@]}"; do
    read -ra words <<<"$line"
    if [ ! -x "$here/tests/${words[0]}" ]; then
        echo "run.sh: tests/${words[0]} is missing or not executable" >&2
        missing=1
    fi
done
for b in airfoil wave poisson parloop-device report.py; do
    [ -e "$here/$b" ] || { echo "run.sh: $b is missing" >&2; missing=1; }
done
((missing == 0)) || exit 1
cxx=${CXX:-g++}
if [ "$dry" = 0 ] && ! command -v "$cxx" >/dev/null; then
    echo "run.sh: no C++ compiler ($cxx): the tests that use the emulated device or g++ are left out" >&2
fi

if want tests; then
    [ "$dry" = 1 ] || (nvidia-smi -L || true) | tee "$out/device.txt"
    for line in "${tests[@]}"; do
        read -ra words <<<"$line"
        bin=${words[0]}
        if [ "$dry" = 0 ] && ! command -v "$cxx" >/dev/null && [[ $bin != *cuda_* ]]; then
            ran+=("skip      $bin (no C++ compiler)")
            continue
        fi
        x "test $bin" "$out/logs/test-$bin.txt" env PARLOOP_BACKEND=cuda PARLOOP_TEST_DEVICE=cuda PARLOOP_REQUIRE_CUDA=1 PARLOOP_REQUIRE_NVRTC=1 \
            "$here/tests/$bin" "${words[@]:1}"
    done
fi

if want sanitizer; then
    if [ "$dry" = 1 ] || command -v compute-sanitizer >/dev/null; then
        for line in "${tests[@]}"; do
            read -ra words <<<"$line"
            [[ ${words[0]} == *cuda_* ]] || continue
            x "memcheck ${words[0]}" "$out/logs/memcheck-${words[0]}.txt" \
                compute-sanitizer --tool memcheck --error-exitcode 99 --target-processes all \
                env PARLOOP_REQUIRE_CUDA=1 "$here/tests/${words[0]}" --test-threads=1
        done
        for s in "${strategies[@]}"; do
            x "memcheck airfoil $s" "$out/logs/memcheck-airfoil-$s.txt" \
                compute-sanitizer --tool memcheck --error-exitcode 99 env PARLOOP_STRATEGY="$s" \
                "$here/airfoil" --backend cuda --grid-size 100,150 --iterations 3 --quiet
        done
        x "racecheck airfoil staged" "$out/logs/racecheck-airfoil-staged.txt" \
            compute-sanitizer --tool racecheck --error-exitcode 99 env PARLOOP_STRATEGY=staged \
            "$here/airfoil" --backend cuda --grid-size 40,60 --iterations 1 --quiet
    else
        ran+=("skip      sanitizer (no compute-sanitizer)")
    fi
fi

if want timings; then
    x "device and copy bandwidth" "$out/device-bandwidth.txt" \
        "$here/parloop-device" --backend cuda --bytes $((2 << 30)) --repeats 20
    [ "$dry" = 1 ] || cat "$out/device-bandwidth.txt" >>"$out/device.txt"
    for s in "${strategies[@]}"; do
        x "airfoil $grid x $iterations, $s" "$out/airfoil-$s.txt" \
            env PARLOOP_STRATEGY="$s" PARLOOP_PROFILE="json:$out/profile-$s.json" \
            "$here/airfoil" --backend cuda --grid-size "$grid" --iterations "$iterations" --precise --quiet
    done
    x "report" "$out/report.md" python3 "$here/report.py" "$out" "$grid"
    if [ "$dry" = 0 ] && grep -q '| FAIL |\|no result' "$out/report.md"; then
        failed+=("airfoil residuals")
        echo "FAILED: residuals differ from the reference (see $out/report.md)" >&2
        [ "$keep_going" = 1 ] || { summary; exit 1; }
    fi
fi

if want demos; then
    n=${DEMO_N:-125}
    for b in cuda threads; do
        x "wave 100 x 100, 10000 steps, $b" "$out/wave-100-$b.txt" "$here/wave" --backend $b --quiet
        x "wave 500 x 500, 2000 steps, $b" "$out/wave-500-$b.txt" \
            "$here/wave" --backend $b --mesh-size 500 --steps 2000 --quiet
        x "poisson unit cube $n, $b" "$out/poisson-$n-$b.txt" \
            "$here/poisson" --backend $b --dim 3 --mesh-size "$n" --quiet
    done
    x "airfoil $grid x $iterations, threads" "$out/threads-airfoil.txt" \
        "$here/airfoil" --backend threads --grid-size "$grid" --iterations "$iterations" --precise --quiet
    if [ "$dry" = 1 ] || python3 -c 'import cupy' 2>/dev/null; then
        x "cupy cg $n" "$out/cupy-cg-$n.txt" python3 "$here/cupy_cg.py" "$n"
    else
        ran+=("skip      cupy cg (no cupy)")
    fi
fi

if want profile; then
    if ! grep -q 'nvtx' "$here/build.txt" 2>/dev/null; then
        echo "run.sh: airfoil was built without the nvtx feature: no NVTX ranges (ci/gpu without --no-nvtx adds them)" >&2
    fi
    pgrid=100,150
    if [ "$dry" = 0 ] && command -v nsys >/dev/null; then
        x "nsys profile" "$out/nsys.txt" env PARLOOP_STRATEGY=staged \
            nsys profile --trace cuda,nvtx --force-overwrite true -o "$out/airfoil-staged" \
            "$here/airfoil" --backend cuda --grid-size "$grid" --iterations 20 --quiet
        x "nsys kernel summary" "$out/nsys-kernels.txt" nsys stats --report cuda_gpu_kern_sum,nvtx_sum \
            "$out/airfoil-staged.nsys-rep"
    elif [ "$dry" = 1 ] || command -v ncu >/dev/null; then
        # Kernels are named after their innermost NVTX range
        # (kernel/section/strategy); the report keeps the metrics.
        x "ncu profile (NVTX ranges)" "$out/ncu.txt" env PARLOOP_STRATEGY=staged \
            ncu --nvtx --print-nvtx-rename kernel --print-summary per-kernel --section SpeedOfLight \
            --launch-count 300 --export "$out/airfoil-staged" --force-overwrite \
            "$here/airfoil" --backend cuda --grid-size "$pgrid" --iterations 2 --quiet
        x "ncu summary" "$out/ncu-summary.txt" \
            ncu --import "$out/airfoil-staged.ncu-rep" --print-nvtx-rename kernel --print-summary per-kernel
        # The FEM demos' loops by their NVTX names: the wave's seven loops
        # of seed 000, poisson's assembly and CG.
        x "ncu wave (NVTX ranges)" "$out/ncu-wave.txt" \
            ncu --nvtx --print-nvtx-rename kernel --print-summary per-kernel --section SpeedOfLight \
            --launch-count 100 "$here/wave" --backend cuda --mesh-size 100 --steps 5 --quiet
        x "ncu poisson (NVTX ranges)" "$out/ncu-poisson.txt" \
            ncu --nvtx --print-nvtx-rename kernel --print-summary per-kernel --section SpeedOfLight \
            --launch-count 200 "$here/poisson" --backend cuda --dim 3 --mesh-size 16 --quiet
    else
        ran+=("skip      profile (neither nsys nor ncu)")
    fi
fi

summary
((${#failed[@]} == 0))
