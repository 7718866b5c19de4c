# infertune: the two entry points a newcomer needs are `make demo` and `make test`.
VENV    := .venv
BIN     := $(VENV)/bin
LABCTL  := $(BIN)/python lab/labctl
# The checkout is the collection infertune.fleet: ansible.cfg's collections_path finds it here
# (the link is tracked: a clean clone's playbooks resolve; this remakes it where it was lost).
COLLECTION_LINK := collections/ansible_collections/infertune/fleet
# Where ansible-test caches get-pip.py; 24.2 is the pip of the pinned ansible-core's ansible-test.
GET_PIP := $(HOME)/.ansible/test/cache/get_pip_24_2.py

.PHONY: setup lab-setup lab-up lab-down demo lint unit sanity monitoring ee-context checks lab-image-trixie lab-test lab-pytest test

# What driving real hosts from the checkout needs: a virtual environment with the pinned Python
# packages (requirements-dev.txt) and the collection link. No system package, no service.
setup: $(BIN)/ansible-playbook $(COLLECTION_LINK)

# The lab's and the tests' Debian packages (podman, debootstrap, pciutils, ..., promtool and
# node_exporter), installed so that none starts or enables a service here (lab/infra/packages.py).
lab-setup: setup
	$(LABCTL) packages

$(BIN)/ansible-playbook: requirements-dev.txt requirements-benchmark.txt requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $@

$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn ../../.. $@

lab-up: lab-setup
	$(LABCTL) host-setup
	$(LABCTL) image
	$(LABCTL) up --hosts 8 --profile seed-epyc-rtxpro6000 --profile-map ""

lab-down:
	$(LABCTL) down

# Main job: bring up the simulated fleet, converge it with site.yml, verify. Then a host's EPP
# changed by hand while it serves: re-tuned live (an EPP write disturbs no server: no drain);
# the rest untouched.
demo: lab-up
	$(BIN)/ansible-playbook site.yml
	$(LABCTL) exec lab-gpu-02 -- sh -c 'for f in /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference; do echo balance_power >$$f; done'
	$(BIN)/ansible-playbook site.yml

lint: setup
	$(BIN)/yamllint -s .
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/ansible-lint --profile production
	$(BIN)/ansible-playbook --syntax-check -i inventory/example site.yml

unit: setup
	$(BIN)/pytest -q tests/unit

# ansible-test sanity on the collection as it ships: built, installed under a temporary collections
# path (ansible-test runs from .../ansible_collections/infertune/fleet), each test's pinned
# requirements in ansible-test's own virtual environments (--venv).
sanity: setup $(GET_PIP)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(BIN)/ansible-galaxy collection build --output-path "$$tmp" . >/dev/null && \
	ANSIBLE_COLLECTIONS_PATH="$$tmp" $(BIN)/ansible-galaxy collection install --offline -p "$$tmp" \
		"$$tmp"/infertune-fleet-*.tar.gz >/dev/null && \
	cd "$$tmp/ansible_collections/infertune/fleet" && \
	$(CURDIR)/$(BIN)/ansible-test sanity --venv --python 3.11

# ansible-test puts pip into each of its virtual environments with get-pip.py, downloaded from a
# host that is no package registry; the stand-in installs the same pip from the package index.
$(GET_PIP): tests/sanity/get_pip.py
	mkdir -p $(dir $@)
	cp $< $@

# The drift watch's alert rules and their unit tests (promtool: Debian's prometheus package).
# The unit tests run promtool check metrics on a textfile the drift watch wrote.
monitoring: lab-setup
	promtool check rules monitoring/infertune-rules.yml
	promtool test rules monitoring/tests/infertune-rules.test.yml

lab-test: lab-up
	$(MAKE) lab-pytest

lab-pytest:
	$(BIN)/pytest -q -m lab --durations=15 tests/lab

# The mixed-fleet lab test's Debian 13 hosts need their own image; built once, then cached.
lab-image-trixie: lab-up
	$(LABCTL) image trixie

# The collection's tarball (build/collection) and the execution environment's build context
# (build/ee: Containerfile, the tarball, requirements), offline. Building the image from it
# needs a registry: docs/collection.md, "Execution environment".
# ansible-builder says "Complete!" even when a file execution-environment.yml names is missing
# (the tarball of another version): the context must hold the tarball galaxy.yml builds.
ee-context: setup
	rm -rf build/collection build/ee
	$(BIN)/ansible-galaxy collection build --output-path build/collection
	$(BIN)/ansible-builder create --file execution-environment.yml --context build/ee
	@tarball=$$(awk '/^namespace:/{n=$$2} /^name:/{m=$$2} /^version:/{v=$$2} END{print n "-" m "-" v ".tar.gz"}' galaxy.yml); \
	test -f "build/ee/_build/collections/$$tarball" || { echo "make ee-context: build/ee lacks the collection's" \
		"tarball $$tarball: execution-environment.yml must name the one galaxy.yml builds" >&2; exit 1; }

# Lint and unit tests need one core, the lab's image builds mostly the network and the disk.
checks: lint unit sanity monitoring ee-context

# Every test: lint, unit and sanity tests while the lab comes up, then the lab tests.
test: lab-setup
	$(MAKE) -j2 --output-sync=target lab-image-trixie checks
	$(MAKE) lab-pytest
