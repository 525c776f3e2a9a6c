# Two commands for a new machine (see docs/development.md):
#   make demo   train a real model through the Helm-installed operator on a local cluster with two real nodes
#               (KWOK where it cannot), and watch it
#   make test   lint, type-check, docs (mkdocs --strict), unit tests and the end-to-end suite on the local cluster
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test lanes lint docs unit e2e venv binaries prebuild crds rbac chart lock release release-tree release-version release-check release-tag

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

binaries:
	bash localcluster/build.sh

# Everything the suite builds (every localcluster/build.sh component, the real nodes' binaries and images,
# the operator image), once, in two lanes at once: Go, and the images (localcluster/prebuild.py).
prebuild: venv
	$(PY) -m localcluster.prebuild

crds: venv
	$(PY) -m trainer.api.crd
	$(MAKE) --no-print-directory chart

# The ClusterRole, the two Roles and the overlays' RBAC patches, from the permissions the modules declare
# (rendered by trainer/render/rbac.py), and the webhook configurations, from trainer/webhook/server.py.
rbac: venv
	$(PY) -m trainer.render.rbac
	$(MAKE) --no-print-directory chart

# charts/trainer's CRDs and the files its templates read (RBAC, webhook configurations, alerting rules, dashboard):
# verbatim copies of config/'s (tests/tooling/test_helm_chart.py fails when one is stale).
chart:
	rm -rf charts/trainer/crds charts/trainer/files/config
	mkdir -p charts/trainer/crds charts/trainer/files/config/rbac charts/trainer/files/config/webhook \
	  charts/trainer/files/config/prometheus
	cp config/crd/bases/*.yaml charts/trainer/crds/
	cp config/rbac/role.yaml config/rbac/leader_election_role.yaml config/rbac/webhook_certificates_role.yaml \
	  charts/trainer/files/config/rbac/
	cp config/webhook/manifests.yaml charts/trainer/files/config/webhook/
	cp config/prometheus/rules.yaml config/prometheus/dashboard.json charts/trainer/files/config/prometheus/
	for f in config/overlays/*/role_patch.yaml; do \
	  mkdir -p charts/trainer/files/$$(dirname $$f) && cp $$f charts/trainer/files/$$f; done

# requirements.lock (the image's dependencies, with hashes) from pyproject.toml, with pip-tools in
# a throwaway venv; PyPI only, so the hashes are those of the published files.
lock: venv
	rm -rf $(VENV)/piptools && $(PY) -m venv $(VENV)/piptools
	$(VENV)/piptools/bin/pip install --quiet pip-tools
	env -u PIP_FIND_LINKS $(VENV)/piptools/bin/pip-compile --quiet --generate-hashes --allow-unsafe \
	  --strip-extras --no-emit-index-url --no-emit-find-links --all-build-deps \
	  --output-file requirements.lock pyproject.toml

# Builds only what it needs (localcluster/demo.py), not every binary of `make binaries`.
demo: venv
	$(PY) -m localcluster.demo

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy trainer tests e2e bench localcluster conftest.py
	$(PY) -m trainer.render.rbac --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir $(VENV)/site

# The docs site (mkdocs.yml, docs/) at http://127.0.0.1:8000, rebuilt on every change.
docs: venv
	$(VENV)/bin/mkdocs serve

unit: venv
	$(PY) -m pytest tests -q

e2e: venv binaries
	$(PY) -m pytest e2e -v

# Real pods on real kubelets (root, Debian; builds kubelet, CoreDNS and the training image once).
e2e-real: venv binaries
	TRAINER_E2E_REAL=1 $(PY) -m pytest e2e/test_real_pods.py e2e/test_upstream_e2e_real.py -v -s

# The suite in two lanes (pytest-xdist, ModuleLanes of the root conftest.py), building on first use what
# is missing. The e2e operators run as their own ServiceAccount with the RBAC of config/ (proving it sufficient).
lanes: venv
	TRAINER_E2E_OPERATOR_SA=1 $(PY) -m pytest tests e2e -v -p no:cacheprovider -n 2

# What every cluster and the real nodes need first, then the lint and the lanes while the other
# components build beside them at the lowest CPU priority (localcluster/prebuild.py --meanwhile).
test: venv
	$(PY) -m localcluster.prebuild --meanwhile $(MAKE) --no-print-directory lint lanes

# The release, in DIST (default dist/): the wheel and sdist, the chart package and the operator image
# (an OCI archive buildah builds from the Dockerfile), all stamped VERSION: pyproject.toml's, or `make
# release VERSION=x.y.z` (X.Y.Z only: the same string for Python, Helm and the image tag). They are built
# from a copy of the files they need (RELEASE_TREE, git-ignored) whose pyproject.toml carries VERSION, so
# no checked-in file changes; the chart gets it from `helm package`. Publishing them: docs/releasing.md.
# Built from a clean git tree, it ends with the annotated tag vVERSION on HEAD; it refuses before building
# when the tree has changes (untracked files too) or the tag exists. TAG=0 builds without either.
VERSION ?= $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
DIST ?= dist
RELEASE_TREE ?= build/release
TAG ?= 1
RELEASE_FILES := pyproject.toml README.md LICENSE Dockerfile .dockerignore requirements.lock trainer localcluster

release-version:
	@echo '$(VERSION)' | grep -Eqx '[0-9]+\.[0-9]+\.[0-9]+' || { echo "VERSION must be X.Y.Z, not '$(VERSION)'" >&2; exit 1; }

release-tree: release-version
	rm -rf $(RELEASE_TREE) && mkdir -p $(RELEASE_TREE)
	cp -r $(RELEASE_FILES) $(RELEASE_TREE)/ && find $(RELEASE_TREE) -name __pycache__ -prune -exec rm -rf {} +
	sed -i 's/^version = ".*"$$/version = "$(VERSION)"/' $(RELEASE_TREE)/pyproject.toml

release-check: release-version
ifneq ($(TAG),0)
	@git rev-parse --verify -q HEAD >/dev/null || { echo "make release tags v$(VERSION) on HEAD: not in a git tree with a commit (TAG=0 builds without a tag)" >&2; exit 1; }
	@test -z "$$(git status --porcelain)" || { git status --short >&2; echo "the git tree has changes (above): commit them or set them aside before a release, which tags v$(VERSION) on HEAD (TAG=0 builds without a tag)" >&2; exit 1; }
	@! git rev-parse --verify -q 'refs/tags/v$(VERSION)' >/dev/null || { echo "tag v$(VERSION) exists already: release another VERSION (TAG=0 builds without a tag)" >&2; exit 1; }
endif

release-tag: release-check
ifneq ($(TAG),0)
	git tag -a 'v$(VERSION)' -m 'trainer $(VERSION)'
	@echo "tagged v$(VERSION) on $$(git rev-parse --short HEAD); publish it with: git push origin v$(VERSION)"
endif

release: release-check venv release-tree
	rm -rf $(DIST) && mkdir -p $(DIST)
	cd $(RELEASE_TREE) && $(abspath $(PY)) -m build --outdir $(abspath $(DIST)) .
	"$$($(PY) -c 'from localcluster.binaries import ensure; print(ensure("helm")["helm"])')" package charts/trainer \
	  --version $(VERSION) --app-version $(VERSION) -d $(DIST)
	cd $(RELEASE_TREE) && $(abspath $(PY)) -m localcluster.operator_image $(VERSION) >image.txt
	cp "$$(cut -f2 $(RELEASE_TREE)/image.txt)" $(DIST)/trainer-operator-$(VERSION).tar
	ls -l $(DIST)
	$(MAKE) --no-print-directory release-tag
