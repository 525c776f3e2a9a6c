# The operator image: `docker build -t trainer-operator:0.1.0 .` (config/ deploys that tag).
#
# Stage 1 installs the locked dependencies (requirements.lock, every file checked against its
# sha256) and then the project itself into /opt/venv; stage 2 is the slim runtime with only that
# venv, run as a non-root user. Nothing is written to / at run time (bytecode is compiled at build
# time), so the pod runs with readOnlyRootFilesystem. Regenerate the lock after changing the
# dependencies in pyproject.toml: `make lock`.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY requirements.lock ./
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY trainer ./trainer
RUN /opt/venv/bin/pip install --no-deps --no-build-isolation . \
    && /opt/venv/bin/pip uninstall --yes setuptools \
    && /opt/venv/bin/python -m compileall -q /opt/venv/lib

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 65532 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin trainer
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
# metrics, health probes
EXPOSE 8080 8081
ENTRYPOINT ["trainer-operator"]
