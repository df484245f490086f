# The two set-up commands of the README: `make demo` and `make test`.
# Both create .venv on first use; everything they need is installed from here.
# A cloud's commands need its extras: `make setup CLOUD=gcp` or `make setup CLOUD=aws`
# (spotbench/cli/extras.py says the same when one is missing).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CLOUD  ?=
CLOUD_EXTRAS_gcp := gcp,infra,ops
CLOUD_EXTRAS_aws := aws,infra,ops
ifneq ($(filter-out gcp aws,$(CLOUD)),)
$(error CLOUD=$(CLOUD): choose CLOUD=gcp or CLOUD=aws (or leave it out for the local cloud))
endif
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: demo test setup setup-dev sshd boot-tools chromium clean bench lambda-layer images history-demo

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e .
	$(BIN)/python -m workloads.osu.cbuild   # the C OSU harness, with the mpich wheel's mpicc
	touch $@

# PyTorch: the dev extra pins torch==2.13.0, the CPU build this project's machines keep on
# disk (pip takes it: +18 s, +770 MB); any other release or range would pull PyPI's CUDA
# build (gigabytes the suite never uses). PyTorch's own wheel index is not reachable here.
$(VENV)/.installed-dev: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m workloads.osu.cbuild   # the C OSU harness, with the mpich wheel's mpicc
	touch $@ $(VENV)/.installed $(VENV)/.installed-gcp $(VENV)/.installed-aws

$(VENV)/.installed-gcp $(VENV)/.installed-aws: $(VENV)/.installed-%: $(VENV)/.installed pyproject.toml
	$(BIN)/pip install --quiet -e '.[$(CLOUD_EXTRAS_$*)]'
	touch $@

setup: $(VENV)/.installed $(if $(CLOUD),$(VENV)/.installed-$(CLOUD))  ## runtime install (local cloud, OSU, report); CLOUD=gcp|aws adds that cloud's extras
	@echo "installed in $(VENV): run commands as $(BIN)/spotbench, or \`source $(BIN)/activate\` first"
setup-dev: $(VENV)/.installed-dev sshd boot-tools chromium   ## everything the test suite needs

sshd:                              ## openssh-server for the ssh/fabric tests
	@bash scripts/ensure_sshd.sh

boot-tools:                        ## cloud-init, shellcheck, nftables for tests/fidelity
	@bash scripts/ensure_boot_tools.sh

chromium:                          ## headless Chromium: tests/report renders the reports as a person sees them
	@bash scripts/ensure_chromium.sh

demo: setup                        ## a real OSU sweep on the local cloud
	$(BIN)/spotbench run examples/osu-local.yaml

history-demo: setup               ## several local runs, the last ones slowed on purpose: the change point found
	$(BIN)/python scripts/history_demo.py

# The suite's workers (pytest-xdist): most tests wait on subprocesses, sockets and VMs of the
# boot lab more than they compute, so more workers than cores pay; tests/parallel.py says
# which tests share a worker. `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= 4
test: setup-dev                    ## the whole suite (pytest's exit 5 = no test ran: an error here)
	@$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (check testpaths in pyproject.toml)" >&2; fi; \
	exit $$rc

bench: setup-dev                   ## figures in JSON (see bench/README.md)
	@for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f; done

lambda-layer: $(VENV)/.installed   ## third-party deps of the AWS Lambdas, ahead of `pulumi up` (which builds them itself): the aws extra, as wheels
	$(BIN)/python infra/aws/layer.py

images:                            ## build images/* and push them: make images REGISTRY=… [TAG=latest]
	@bash scripts/build_images.sh "$(REGISTRY)" "$(or $(TAG),latest)"

clean:
	rm -rf $(VENV) .spotbench results reports .pytest_cache
