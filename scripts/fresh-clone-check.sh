#!/usr/bin/env bash
# Runs the README's two commands (`make demo`, `make test`) in a fresh clone of this
# repository, the way a newcomer would, with the system's PEP-668 ("externally managed")
# Python as `python3` — Debian 12's or Ubuntu 24.04's /usr/bin/python3 refuses
# `pip install` outside a virtual environment, so this catches anything that installs into
# the system interpreter. Prints the time each command took; exits non-zero if either fails.
#
# Usage: scripts/fresh-clone-check.sh            (or: make fresh-clone-check)
#
# Environment:
#   SYSTEM_PYTHON  the interpreter to put first on PATH as python3 [/usr/bin/python3]
#   REV            the commit to check [HEAD of this repository; uncommitted changes are not
#                  in a clone, so the script warns about them]
#   WORKDIR        where to clone [a new temporary folder, kept for inspection]
#   CARGO_TARGET_DIR  unset by default, so the clone builds from scratch as a newcomer's
#                  would (about 10 minutes of compiling on two cores); set it to reuse a
#                  build cache.
set -euo pipefail

src=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
rev=$(git -C "$src" rev-parse "${REV:-HEAD}")
system_python=${SYSTEM_PYTHON:-/usr/bin/python3}
workdir=${WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/iommulab-fresh.XXXXXX")}

if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
    echo "warning: $src has uncommitted changes; the clone checks commit $rev without them" >&2
fi
[ -x "$system_python" ] || { echo "error: $system_python not found (set SYSTEM_PYTHON)" >&2; exit 1; }

# Is it really an externally managed Python? (PEP 668: a marker file in the stdlib folder.)
marker=$("$system_python" -c 'import sysconfig, os; print(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))')
if [ -f "$marker" ]; then
    echo "system python: $system_python ($("$system_python" -V 2>&1)), externally managed (PEP 668: $marker)"
else
    echo "warning: $system_python has no $marker: it accepts global pip installs, so this run cannot show that nothing is installed into it" >&2
fi
before=$("$system_python" -m pip list --disable-pip-version-check 2>/dev/null | sha256sum || true)

# A PATH whose python3 (and python) is the system one: the README's commands run unchanged.
bindir="$workdir/bin"
clone="$workdir/iommulab"
mkdir -p "$bindir"
ln -sf "$system_python" "$bindir/python3"
ln -sf "$system_python" "$bindir/python"
export PATH="$bindir:$PATH"
unset VIRTUAL_ENV PYTHONPATH PYENV_VERSION

git clone --quiet --no-checkout "$src" "$clone"
git -C "$clone" checkout --quiet "$rev"
echo "clone: $clone at $(git -C "$clone" log -1 --format='%h %s' | cut -c1-100)"
echo "python3 on PATH: $(command -v python3) -> $(python3 -c 'import sys; print(sys.executable)')"

status=0
for target in demo test; do
    log="$workdir/make-$target.log"
    start=$(date +%s)
    if (cd "$clone" && make "$target") >"$log" 2>&1; then
        result=passed
    else
        result=FAILED
        status=1
    fi
    echo "make $target: $result in $(($(date +%s) - start)) s (log: $log)"
    if [ "$result" = FAILED ]; then tail -n 30 "$log" | sed 's/^/    /'; fi
done

if [ -f "$clone/results/index.html" ]; then
    echo "report: $clone/results/index.html"
else
    echo "error: make demo wrote no results/index.html" >&2
    status=1
fi
after=$("$system_python" -m pip list --disable-pip-version-check 2>/dev/null | sha256sum || true)
if [ "$before" != "$after" ]; then
    echo "error: the packages of $system_python changed during the run" >&2
    status=1
else
    echo "system python's packages: unchanged"
fi
exit $status
