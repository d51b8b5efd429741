# One image for the API and the workers. For GPU workers pick a CUDA torch build:
#   docker compose build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
# GPU workers that generate with vLLM (use_vllm): the `gpu` target adds the `vllm` extra:
#   docker build --target gpu --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 .
# The default (last) target is `cpu`, the image above without vLLM.
FROM python:3.11-slim AS base
ARG TORCH_SPEC=torch==2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
WORKDIR /srv/grpo
# bubblewrap: the sandbox code rewards run their tests in
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir "${TORCH_SPEC}" --index-url "${TORCH_INDEX_URL}"
COPY pyproject.toml README.md alembic.ini ./
COPY app app
COPY worker worker
COPY grpo grpo
COPY migrations migrations
COPY examples examples
RUN pip install --no-cache-dir -e .
EXPOSE 8000

# vLLM pins its own torch (the CUDA build of the same version); workers from this image list
# `vllm` among their engines (GET /api/workers).
FROM base AS gpu
RUN pip install --no-cache-dir -e ".[vllm]"

FROM base AS cpu
