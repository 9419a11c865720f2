# syntax=docker/dockerfile:1
# Campfire in a container: a build stage compiles the wheels (llama.cpp among them) and installs
# Campfire; the runtime stage carries only that virtual environment, and runs as a user without
# privileges. Data lives in the /data volume.

FROM python:3.11-slim-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
RUN python -m venv /venv
ENV PATH=/venv/bin:$PATH
COPY pyproject.toml README.md ./
COPY bot bot
COPY cogs cogs
COPY engine engine
# Shipped scenarios: engine/library/scenarios/builtin links here (data/README.md).
COPY data data
# Campfire is installed like any package: its scenarios, scripting prelude and migrations are
# package data, found beside its modules in the virtual environment.
RUN pip install --no-cache-dir --upgrade pip \
    && pip install --no-cache-dir ".[postgres,local]"

FROM python:3.11-slim-bookworm AS runtime
# fonts-dejavu-core: /tree's picture names save points in any script (Pillow's own font is
# Latin only).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 campfire \
    && mkdir -m 700 /data && chown campfire /data
COPY --from=build /venv /venv
WORKDIR /data
ENV PATH=/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    CAMPFIRE_DATA_DIR=/data
USER campfire
VOLUME ["/data"]
# Without DISCORD_TOKEN this opens the console: run it with `docker run -it`.
CMD ["python", "-m", "bot"]
