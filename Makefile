# Everything a fresh machine needs is installed from this file and pyproject.toml.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
HOSTS_STAMP := hosts/node_modules/.installed

.PHONY: demo test check check-types check-tests lint bench bench-cli chaos soak docs lock clean hosts

# constraints.txt pins every package that a fresh install resolves (`make lock` makes it
# anew); the package's own ranges in pyproject.toml stay open for library users.
$(STAMP): pyproject.toml constraints.txt
	@echo "Installing clankie and its tools into $(VENV) (the first time takes a minute or two)..."
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet -e '.[dev,soak]'
	echo "# Made by 'make lock' from a fresh venv on $$(date -u +%Y-%m-%d); used by make demo/test and CI." > constraints.txt
	.lock-venv/bin/pip freeze --exclude-editable | grep -v '^clankie' >> constraints.txt
	rm -rf .lock-venv

demo: $(STAMP)
	$(VENV)/bin/clankie demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set, as in `check`: every
# `clankie` subprocess (hundreds) would otherwise compile the package anew (docs/testing.md).
# The coding hosts of SPEC section 13 are installed first (see `hosts` below): their tests
# never skip. `--durations=20` lists the slowest 20 tests at the end. Four workers on two
# cores: most e2e tests wait (on a service, a model's pace, a browser), so two left a
# third of the CPU idle (docs/testing.md, "Test time (issues 40-42)").
test: $(STAMP) $(HOSTS_STAMP) lint
	PYTHONDONTWRITEBYTECODE= $(VENV)/bin/python -m pytest -n 4 --dist loadfile --durations=20

# The quick loop (docs/testing.md): ruff, then mypy beside the tests not marked e2e, tui,
# hosts or slow (mypy is one process, and from a cold cache it takes as long as the tests:
# side by side they share the two cores). Each part's output is shown whole once it ends;
# `check` fails if either fails. tests/e2e, tui and hosts are not even collected, so the
# plugins only they use stay off, and bytecode is cached even where PYTHONDONTWRITEBYTECODE
# is set (compiling and rewriting the test modules anew each time costs more than the
# tests). `make test` still runs everything.
check: $(STAMP)
	$(VENV)/bin/ruff check .
	@$(MAKE) --no-print-directory -j2 --output-sync=target check-types check-tests

check-types: $(STAMP)
	$(VENV)/bin/mypy

check-tests: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(VENV)/bin/python -m pytest -q -n 2 --dist loadfile \
		-p no:schemathesis -p no:textual-snapshot -p no:syrupy \
		--ignore=tests/e2e --ignore=tests/tui --ignore=tests/hosts \
		-m "not e2e and not tui and not slow and not hosts"

# The coding agents of SPEC section 13, for real (docs/hosts.md): Claude Code, Codex CLI,
# Gemini CLI and OpenCode, pinned by hosts/package-lock.json and installed into
# hosts/node_modules (again only when the lock changes), each made to ask through `clankie mcp`
# and get the owner's answer. HOSTS_BRIDGE_SRC=DIR runs the bridge (and serve) from another
# source tree. Not `npm ci`: the registry serves none of opencode-ai's packages for other
# platforms, so the lock lacks them and `npm ci` calls it out of sync; a clean `npm install`
# from the lock, failing if it would change the lock, installs the same.
$(HOSTS_STAMP): hosts/package.json hosts/package-lock.json
	@cd hosts && rm -rf node_modules && locked="$$(sha256sum package-lock.json)" && \
		start=$$(date +%s) && npm install --no-audit --no-fund && \
		echo "npm install took $$(( $$(date +%s) - start )) s" && \
		echo "$$locked" | sha256sum --check --quiet - || \
		{ echo "hosts/package-lock.json is not what npm installs: make it anew with npm install"; exit 1; }
	touch $(HOSTS_STAMP)

hosts: $(STAMP) $(HOSTS_STAMP)
	HOSTS_REPORT=hosts/last-run.json PYTHONPATH=$${HOSTS_BRIDGE_SRC:-src} \
		$(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/hosts

bench: $(STAMP)
	$(VENV)/bin/python bench/accept.py
	$(VENV)/bin/python bench/workspace.py
	$(VENV)/bin/python bench/cli.py

bench-cli: $(STAMP)
	$(VENV)/bin/python bench/cli.py

soak: $(STAMP)
	$(VENV)/bin/pip install --quiet -c constraints.txt -e '.[dev,soak]'
	$(VENV)/bin/python bench/soak.py --minutes 30 --out soak-out

chaos: $(STAMP)
	$(VENV)/bin/python -m tests.chaos --kills 500
	CLANKIE_CAMPAIGN_EXAMPLES=500 $(VENV)/bin/python -m pytest -q -p no:cacheprovider \
		tests/workspace/test_hostile_campaign.py

docs: $(STAMP)
	$(VENV)/bin/python -c 'from clankie.core.diagram import render; open("docs/lifecycle.md", "w").write(render())'

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
