# infertune: the two entry points a newcomer needs are `make demo` and `make test`.
VENV    := .venv
BIN     := $(VENV)/bin
LABCTL  := $(BIN)/python lab/labctl
APT_PKGS := podman runc debootstrap pciutils iptables
# The checkout is the collection infertune.fleet: ansible.cfg's collections_path finds it here.
COLLECTION_LINK := collections/ansible_collections/infertune/fleet

.PHONY: setup lab-up lab-down demo lint unit ee-context checks lab-image-trixie lab-test lab-pytest test

# Control-node tooling: Debian packages for the lab, pinned Python packages.
setup: $(BIN)/ansible-playbook $(COLLECTION_LINK)
	@missing=$$(for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

$(BIN)/ansible-playbook: requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $@

$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn ../../.. $@

lab-up: setup
	$(LABCTL) host-setup
	$(LABCTL) image
	$(LABCTL) up --hosts 8 --profile seed-epyc-rtxpro6000 --profile-map ""

lab-down:
	$(LABCTL) down

# Main job: bring up the simulated fleet, converge it with site.yml, verify. Then a host
# changed by hand while it serves: drained, re-tuned, back in service; the rest untouched.
demo: lab-up
	$(BIN)/ansible-playbook site.yml
	$(LABCTL) exec lab-gpu-02 -- sh -c 'for f in /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference; do echo balance_power >$$f; done'
	$(BIN)/ansible-playbook site.yml

lint: setup
	$(BIN)/yamllint -s .
	$(BIN)/ansible-lint --profile production
	$(BIN)/ansible-playbook --syntax-check site.yml

unit: setup
	$(BIN)/pytest -q tests/unit

lab-test: lab-up
	$(MAKE) lab-pytest

lab-pytest:
	$(BIN)/pytest -q -m lab --durations=15 tests/lab

# The mixed-fleet lab test's Debian 13 hosts need their own image; built once, then cached.
lab-image-trixie: lab-up
	$(LABCTL) image trixie

# The collection's tarball (build/collection) and the execution environment's build context
# (build/ee: Containerfile, the tarball, requirements), offline. Building the image from it
# needs a registry: README, "Install as a collection".
ee-context: setup
	rm -rf build/collection build/ee
	$(BIN)/ansible-galaxy collection build --output-path build/collection
	$(BIN)/ansible-builder create --file execution-environment.yml --context build/ee

# Lint and unit tests need one core, the lab's image builds mostly the network and the disk.
checks: lint unit ee-context

# Every test: lint and unit tests while the lab comes up, then the lab tests.
test: setup
	$(MAKE) -j2 --output-sync=target lab-image-trixie checks
	$(MAKE) lab-pytest
