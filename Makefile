# The two commands of README.md. Both install what they need first.
#
# Python never touches the system interpreter: everything Python runs in a project virtual
# environment ($(VENV), created with `$(PYTHON) -m venv`). That is what a PEP-668 ("externally
# managed") Python such as Debian 12's or Ubuntu 24.04's /usr/bin/python3 requires, and it
# keeps the lab's pins away from the user's packages. `make demo` needs no Python at all.
CARGO ?= cargo
# The interpreter that creates the venv (any Python >= 3.11; see pyproject.toml).
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
WHEELS ?= $(TARGET_DIR)/wheels
OUT ?= results
# Headless Chromium for the HTML report test (Debian/Ubuntu package `chromium`).
CHROMIUM ?= $(shell command -v chromium || command -v chromium-browser || command -v google-chrome || echo chromium)

# Everything `make test` installs into the venv: the package's own dependencies and its
# extras (ray, plot), the build backend and the test tools. Pinned where a version matters
# (stub packages and libCacheSim match what the tests were written against).
PY_TEST_DEPS = maturin pytest hypothesis numpy pandas matplotlib tqdm mypy typing_extensions \
	pandas-stubs==3.1.0.261029 types-tqdm==4.70.0.20261106 "ray[default]==2.60.0" libcachesim==0.3.5

.PHONY: deps rust-deps venv py-deps chromium demo test pytest report-test doc-check fuzz-check fuzz-smoke bench bench-python fresh-clone-check clean-venv

# Rust components (the toolchain itself comes from rustup; rust-toolchain.toml pins it).
rust-deps:
	@command -v $(CARGO) >/dev/null || { echo "error: cargo not found; install Rust from https://rustup.rs" >&2; exit 1; }
	@if command -v rustup >/dev/null; then rustup component add rustfmt clippy >/dev/null 2>&1 || true; fi

# The venv. A Debian/Ubuntu Python without the venv module (or without ensurepip, which venv
# needs to install pip) gets a message naming the package, not a traceback.
$(VPY):
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or newer (Debian/Ubuntu: apt install python3 python3-venv)" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "error: $(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'); iommulab needs 3.11 or newer (set PYTHON=python3.11 or newer)" >&2; exit 1; }
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { v=$$($(PYTHON) -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")'); echo "error: $(PYTHON) cannot create a virtual environment (no venv/ensurepip module); on Debian/Ubuntu install the package python3-venv (or python$$v-venv): sudo apt install python3-venv" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check --upgrade pip

venv: $(VPY)

# Test and build tools in the venv; redone when this Makefile or pyproject.toml changes.
$(VENV)/.deps-stamp: $(VPY) Makefile pyproject.toml
	$(VPY) -m pip install --quiet --disable-pip-version-check $(PY_TEST_DEPS)
	@touch $@

py-deps: $(VENV)/.deps-stamp

# Headless Chromium for tests/report (the HTML report opened in a browser). Installed with
# apt only when it is missing and apt is there; otherwise the test says what to install.
chromium:
	@if command -v $(CHROMIUM) >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium (apt-get) for the HTML report test"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	else echo "warning: chromium not found and no apt-get; the HTML report test will fail (install chromium, or set CHROMIUM=/path/to/chrome)" >&2; fi

deps: rust-deps py-deps chromium

# Builds in release and reruns every reproduction (Fujita & Mori's Figure 4 first) on the
# built-in defaults; ends with the path of the report to open. Rust only.
demo: rust-deps
	$(CARGO) build --release -p iommulab-cli
	$(TARGET_DIR)/release/iommulab reproduce all --out $(OUT)
	@echo
	@echo "open $(abspath $(OUT))/index.html in a browser (markdown: $(OUT)/index.md)"

# Format check, clippy with -D warnings, every Rust test (the HTML report test opens the page
# in headless Chromium), then the Python package: build the wheel, install it into the venv,
# check the stubs against the module, and run pytest (Ray included).
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	IOMMULAB_REQUIRE_LIBCACHESIM=1 IOMMULAB_PYTHON=$(abspath $(VPY)) IOMMULAB_REQUIRE_CHROMIUM=1 CHROMIUM=$(CHROMIUM) \
		$(CARGO) test --workspace --all-features
	$(MAKE) doc-check
	$(MAKE) fuzz-check
	$(MAKE) pytest

# The API docs build without a warning: a rustdoc link to an item that moved or went fails.
doc-check: rust-deps
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --all-features --quiet

# The fuzz targets (fuzz/, their own workspace) type-checked on stable, so they cannot rot:
# without libFuzzer linked in (no C++ build, no nightly). Same target folder as the rest, so
# the dependencies checked by clippy above are reused.
fuzz-check: rust-deps
	$(CARGO) check --manifest-path fuzz/Cargo.toml --no-default-features --bins --target-dir $(TARGET_DIR)

# Each fuzz target for FUZZ_SECONDS (default 10) when cargo-fuzz and a nightly toolchain are
# installed; says what is missing otherwise. Not part of `test` (the instrumented nightly
# build takes minutes the first time).
FUZZ_SECONDS ?= 10
fuzz-smoke:
	@if cargo fuzz --version >/dev/null 2>&1 && rustup run nightly rustc --version >/dev/null 2>&1; then \
		cd fuzz && for t in ftrace_line native_block; do \
			cargo +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) -max_len=4096 || exit 1; \
		done; \
	else echo "fuzz-smoke: skipped (needs cargo-fuzz and a nightly toolchain; see fuzz/README.md)"; fi

# The HTML report test alone (headless Chromium).
report-test: rust-deps chromium
	IOMMULAB_REQUIRE_CHROMIUM=1 CHROMIUM=$(CHROMIUM) $(CARGO) test -p iommulab-cli --test cli_report

# The Python part of `test` alone.
pytest: py-deps
	rm -f $(WHEELS)/iommulab-*.whl
	$(VPY) -m maturin build --release --quiet -o $(WHEELS)
	$(VPY) -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps $(WHEELS)/iommulab-*.whl
	$(VPY) -m mypy python/iommulab
	cd tests/python && $(abspath $(VPY)) -m mypy.stubtest iommulab._native --allowlist stubtest-allowlist.txt
	cd tests/python && $(abspath $(VPY)) -m pytest -q .

# Criterion benchmarks (not part of the tests; see BENCHMARKS.md).
bench: rust-deps
	$(CARGO) bench -p iommulab

# Python sweep overhead vs the CLI, and local scaling (BENCHMARKS.md, "Python sweeps").
bench-python: pytest
	$(CARGO) build --release -q -p iommulab-cli
	$(VPY) benches/python/sweep_bench.py --cli $(TARGET_DIR)/release/iommulab

# The README's two commands in a fresh clone with the system's Python (scripts/fresh-clone-check.sh).
fresh-clone-check:
	scripts/fresh-clone-check.sh

clean-venv:
	rm -rf $(VENV)
