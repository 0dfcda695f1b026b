# Both targets create .venv on first use (scripts/bootstrap.sh is idempotent).
.PHONY: venv demo test test-min docs lint typecheck bench

venv:
	@scripts/bootstrap.sh

demo: venv
	.venv/bin/python examples/main_job.py

test: venv
	.venv/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

# The declared lower bounds (constraints-min.txt) in two small venvs: core, MDS, CLI, classic Spark.
test-min:
	@scripts/min_versions.sh

# The documentation site (docs/, mkdocs.yml); --strict: broken links or anchors fail.
docs: venv
	.venv/bin/mkdocs build --strict --quiet

lint: venv
	.venv/bin/ruff check src tests benchmarks examples

# mypy over src/ with pyproject.toml's [tool.mypy] (a CI gate: .ci/run), and the no-private-reach
# check over all of src/petastream.
typecheck: venv
	.venv/bin/python scripts/check_reaches.py
	.venv/bin/mypy

bench: venv
	.venv/bin/python -m benchmarks.run $(BENCH_ARGS)

# Peer environments for the epoch benchmarks (.bench/envs/<peer>; pins in benchmarks/envs/).
.PHONY: bench-envs bench-peers
bench-envs:
	benchmarks/envs/build.sh petastorm mosaic

bench-peers: venv bench-envs
	.venv/bin/python -m benchmarks.run torch_epoch tf_epoch $(BENCH_ARGS)
