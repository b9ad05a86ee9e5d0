#!/bin/sh
# Builds the volcano-rs image with podman from nothing that must be pulled: a static
# volcano-rs binary (glibc linked statically) in a `FROM scratch` image (Containerfile).
#
#   deploy/image/build.sh [--tag NAME] [--test-images]
#
# --tag NAME       the image name (default volcano-rs:latest, which podman stores as
#                  localhost/volcano-rs:latest).
# --test-images    also build the real-node suite's test images from cli/examples/jobcheck.rs:
#                  localhost/volcano-rs-jobcheck:latest and localhost/volcano-rs-pause:latest.
#
# Run it from anywhere inside the repository. The commit printed by `volcano-rs --version`
# comes from git, or from VOLCANO_RS_GIT_COMMIT when building from a tarball without .git.
# Environment: CARGO (default cargo), PODMAN (default podman), CARGO_TARGET_DIR as cargo reads it.
set -eu

tag=volcano-rs:latest
test_images=false
while [ $# -gt 0 ]; do
    case "$1" in
        --tag) [ $# -ge 2 ] || { echo "build.sh: --tag needs a value" >&2; exit 2; }; tag=$2; shift 2 ;;
        --tag=*) tag=${1#--tag=}; shift ;;
        --test-images) test_images=true; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cargo=${CARGO:-cargo}
podman=${PODMAN:-podman}
triple=x86_64-unknown-linux-gnu
command -v "$podman" >/dev/null || { echo "build.sh: $podman not found (apt-get install podman)" >&2; exit 1; }

# A fully static binary, built with the `image` profile (the release profile with fat LTO and
# one codegen unit: smaller, and slower to build): +crt-static links glibc in. An explicit --target keeps the flag
# away from build scripts and proc macros, which must stay dynamic.
examples=
if $test_images; then examples="--example jobcheck"; fi
# Run from a cargo test (cli/tests/real_node.rs), the environment carries the test crate's
# CARGO_PKG_* and CARGO_MANIFEST_* variables; cargo would then see the crates that read such
# variables as changed and rebuild the whole release tree. Build as from a shell.
for v in $(env | sed -n 's/^\(CARGO_PKG_[A-Z_]*\|CARGO_MANIFEST_[A-Z_]*\|CARGO_CRATE_NAME\|CARGO_PRIMARY_PACKAGE\|CARGO_TARGET_TMPDIR\)=.*/\1/p'); do
    unset "$v"
done
(cd "$root" && RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    "$cargo" build --profile image --locked --target "$triple" -p volcano-rs --bin volcano-rs $examples)

target_dir=${CARGO_TARGET_DIR:-$root/target}
case "$target_dir" in /*) ;; *) target_dir=$root/$target_dir ;; esac
out=$target_dir/$triple/image

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT INT TERM

stage() { # stage SOURCE NAME: copies SOURCE into the context as NAME, stripped, after checking it is static
    if readelf -l "$1" | grep -q 'Requesting program interpreter'; then
        echo "build.sh: $1 is dynamically linked; the image has no libc" >&2
        exit 1
    fi
    cp "$1" "$context/$2"
    strip "$context/$2"
}

stage "$out/volcano-rs" volcano-rs
"$podman" build --pull=never -f "$here/Containerfile" -t "$tag" "$context"
if $test_images; then
    stage "$out/examples/jobcheck" jobcheck
    "$podman" build --pull=never -f "$here/Containerfile.jobcheck" -t localhost/volcano-rs-jobcheck:latest "$context"
    "$podman" build --pull=never -f "$here/Containerfile.pause" -t localhost/volcano-rs-pause:latest "$context"
fi
"$podman" image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "volcano-rs" || true
