# shellcheck shell=bash
# What ci/test needs from the machine for the `mpi` feature, decided by
# looking at the file system under a root prefix: "" for this machine, a fake
# tree in ci/test-detect. Sourced; defines functions only.
#
#   detect_libclang ROOT     prints a libclang bindgen can load, or fails
#   detect_mpich_mpicc ROOT  prints MPICH's compiler wrapper (mpicc.mpich) when
#                            MPICH and its mpi.h are installed, or fails
#   detect_mpich_mpiexec ROOT  prints MPICH's launcher (mpiexec.mpich), or fails
#   detect_metis ROOT        succeeds when metis.h is installed
#   detect_missing_packages ROOT  prints the Debian packages to install, one a line
#
# Paths printed are under ROOT. Nothing here installs or changes anything.

# Whether a file name is a libclang that bindgen (clang-sys) can load:
# libclang.so, libclang.so.<N>[.<M>...], libclang-<N>[.<M>...].so[.<K>...].
# libclang-cpp.so.<N> (LLVM's C++ library, installed with LLVM without
# libclang) lacks the C API bindgen calls: it does not count.
detect_is_libclang_name() {
    [[ $1 =~ ^libclang(-[0-9]+(\.[0-9]+)*)?\.so(\.[0-9]+)*$ ]]
}

# The directories clang-sys searches on Linux (clang-sys 1.9, build/common.rs),
# or only LIBCLANG_PATH when it is set (a directory, or the library itself).
detect_libclang() {
    local root=$1 dir file
    local -a dirs=()
    local nullglob
    nullglob=$(shopt -p nullglob || true)
    shopt -s nullglob
    if [ -n "${LIBCLANG_PATH:-}" ]; then
        if [ -f "$root$LIBCLANG_PATH" ] && detect_is_libclang_name "${LIBCLANG_PATH##*/}"; then
            eval "$nullglob"
            printf '%s\n' "$root$LIBCLANG_PATH"
            return 0
        fi
        dirs=("$root$LIBCLANG_PATH")
    else
        dirs=("$root"/usr/local/llvm*/lib* "$root"/usr/local/lib*/*/* "$root"/usr/local/lib*/* "$root"/usr/local/lib*
            "$root"/usr/lib*/*/* "$root"/usr/lib*/* "$root"/usr/lib*)
    fi
    for dir in "${dirs[@]}"; do
        [ -d "$dir" ] || continue
        for file in "$dir"/libclang*.so*; do
            # -e follows symbolic links: a dangling link does not count.
            if detect_is_libclang_name "${file##*/}" && [ -e "$file" ]; then
                eval "$nullglob"
                printf '%s\n' "$file"
                return 0
            fi
        done
    done
    eval "$nullglob"
    return 1
}

# An executable NAME in a PATH directory, under ROOT.
detect_tool() {
    local root=$1 name=$2 dir
    local -a dirs
    IFS=: read -ra dirs <<<"${PATH:-/usr/bin:/bin}"
    for dir in "${dirs[@]}"; do
        if [ -n "$dir" ] && [ -f "$root$dir/$name" ] && [ -x "$root$dir/$name" ]; then
            printf '%s\n' "$root$dir/$name"
            return 0
        fi
    done
    return 1
}

# MPICH's compiler wrapper, by its MPICH-only name: with OpenMPI also
# installed, plain `mpicc` and `mpiexec` are usually OpenMPI's (Debian's
# alternatives prefer it). rsmpi's build script runs `$MPICC -show` and
# gives bindgen the -I directories it prints; mpi.h must be in one of them
# (it comes with libmpich-dev, the wrapper with mpich).
detect_mpich_mpicc() {
    local root=$1 mpicc show word inc
    local -a words dirs=()
    mpicc=$(detect_tool "$root" mpicc.mpich) || return 1
    show=$("$mpicc" -show 2>/dev/null) || return 1
    read -ra words <<<"$show"
    for word in "${words[@]}"; do
        case $word in
            -I?*) dirs+=("${word#-I}") ;;
        esac
    done
    ((${#dirs[@]})) || dirs=(/usr/include)
    for inc in "${dirs[@]}"; do
        if [ -f "$root$inc/mpi.h" ]; then
            printf '%s\n' "$mpicc"
            return 0
        fi
    done
    return 1
}

detect_mpich_mpiexec() {
    detect_tool "$1" mpiexec.mpich
}

detect_metis() {
    [ -f "$1/usr/include/metis.h" ]
}

detect_missing_packages() {
    local root=$1
    if ! detect_mpich_mpicc "$root" >/dev/null || ! detect_mpich_mpiexec "$root" >/dev/null; then
        printf '%s\n' mpich libmpich-dev
    fi
    detect_libclang "$root" >/dev/null || printf '%s\n' libclang-dev
    detect_metis "$root" || printf '%s\n' libmetis-dev
}
