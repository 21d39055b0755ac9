.PHONY: setup run test test-fast bench
setup:
	bash scripts/setup
run:
	bash scripts/run
test:
	bash scripts/test
test-fast:
	bash scripts/test -m "not slow"
bench: setup
	.venv/bin/python benchmarks/reference_vs_litert.py
