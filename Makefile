# The two commands of README.md. Both install what they need first.
CARGO ?= cargo
OUT ?= results

.PHONY: deps demo test bench

# Rust components (the toolchain itself comes with the machine or from rustup).
deps:
	@command -v $(CARGO) >/dev/null || { echo "error: cargo not found; install Rust from https://rustup.rs" >&2; exit 1; }
	@if command -v rustup >/dev/null; then rustup component add rustfmt clippy >/dev/null 2>&1 || true; fi
	python3 -m pip install --quiet libcachesim==0.3.5

# Builds in release, reproduces Fujita & Mori's Figure 4 on the built-in defaults.
demo: deps
	$(CARGO) build --release -p iommulab-cli
	$(CARGO) run --release -q -p iommulab-cli -- reproduce fujita2008 --out $(OUT)
	@echo "open $(OUT)/fujita2008/README.md (figures: $(OUT)/fujita2008/figure4.svg, figure4.png)"

# Format check, clippy with -D warnings, and every test.
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	IOMMULAB_REQUIRE_LIBCACHESIM=1 $(CARGO) test --workspace --all-features

# Criterion benchmarks (not part of the tests; see BENCHMARKS.md).
bench: deps
	$(CARGO) bench -p iommulab
