# The operator image: dependencies installed in a builder stage, run as a non-root user.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY api ./api
COPY trainer ./trainer
RUN python -m venv /venv && /venv/bin/pip install --no-cache-dir .

FROM python:3.11-slim
COPY --from=build /venv /venv
USER 65532:65532
ENV PATH=/venv/bin:$PATH PYTHONUNBUFFERED=1
ENTRYPOINT ["trainer-operator"]
