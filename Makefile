# The two commands of README.md. Both install what they need first.
CARGO ?= cargo
PYTHON ?= python3
WHEELS ?= $(or $(CARGO_TARGET_DIR),target)/wheels
OUT ?= results

.PHONY: deps demo test pytest bench bench-python

# Rust components (the toolchain itself comes with the machine or from rustup).
deps:
	@command -v $(CARGO) >/dev/null || { echo "error: cargo not found; install Rust from https://rustup.rs" >&2; exit 1; }
	@if command -v rustup >/dev/null; then rustup component add rustfmt clippy >/dev/null 2>&1 || true; fi
	$(PYTHON) -m pip install --quiet --disable-pip-version-check maturin pytest hypothesis pandas matplotlib tqdm mypy typing_extensions pandas-stubs==3.1.0.261029 types-tqdm==4.70.0.20261106 "ray[default]==2.60.0" libcachesim==0.3.5

# Builds in release and reruns every reproduction (Fujita & Mori's Figure 4 first) on the
# built-in defaults; ends with the path of the index page.
demo: deps
	$(CARGO) build --release -p iommulab-cli
	$(CARGO) run --release -q -p iommulab-cli -- reproduce all --out $(OUT)
	@echo "open $(OUT)/index.md (Fujita & Mori: $(OUT)/fujita2008/README.md, figure4.svg/png)"

# Format check, clippy with -D warnings, every Rust test, then the Python package: build the
# wheel, install it, check the stubs against the module, and run pytest (Ray included).
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	IOMMULAB_REQUIRE_LIBCACHESIM=1 IOMMULAB_PYTHON=$(PYTHON) $(CARGO) test --workspace --all-features
	$(MAKE) pytest

# The Python part of `test` alone.
pytest:
	rm -f $(WHEELS)/iommulab-*.whl
	$(PYTHON) -m maturin build --release --quiet -o $(WHEELS)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps $(WHEELS)/iommulab-*.whl
	$(PYTHON) -m mypy python/iommulab
	cd tests/python && $(PYTHON) -m mypy.stubtest iommulab._native --allowlist stubtest-allowlist.txt
	cd tests/python && $(PYTHON) -m pytest -q .

# Criterion benchmarks (not part of the tests; see BENCHMARKS.md).
bench: deps
	$(CARGO) bench -p iommulab

# Python sweep overhead vs the CLI, and local scaling (BENCHMARKS.md, "Python sweeps").
bench-python: pytest
	$(CARGO) build --release -q -p iommulab-cli
	$(PYTHON) benches/python/sweep_bench.py --cli $(or $(CARGO_TARGET_DIR),target)/release/iommulab
