# ldp-telemetry: one image for the collector, the aggregator workers and the dashboard.
# Build the load-test image (Locust) with: docker build --build-arg EXTRAS=load .
FROM python:3.11-slim

ARG EXTRAS=server

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN apt-get update \
    && apt-get install -y --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin ldp

WORKDIR /app
COPY pyproject.toml README.md ./
COPY client_sdk ./client_sdk
COPY ldp_store ./ldp_store
COPY ldp_api ./ldp_api
COPY ldp_edge ./ldp_edge
COPY collector ./collector
COPY client_js/dist ./client_js/dist
COPY aggregator ./aggregator
COPY ldp_server ./ldp_server
COPY ldp_relay ./ldp_relay
COPY loadtests ./loadtests
RUN pip install ".[${EXTRAS}]"

USER ldp
# Listen on all interfaces inside the container; compose publishes or scales it.
ENV LDP_BIND=0.0.0.0:8000
EXPOSE 8000

CMD ["gunicorn", "-c", "collector/gunicorn_conf.py", "ldp_server.app:create_server_app()"]
