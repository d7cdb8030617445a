# toksplice: the proxy in a slim, non-root image.
#   docker build -t toksplice .
#   docker build -t toksplice:cuda --build-arg VARIANT=gpu .   (adds CuPy for GPU cold starts)
#   docker run -p 8000:8000 -v /models/qwen3:/model:ro toksplice \
#     --upstream http://vllm:8000 --tokenizer /model --dialect vllm-completions
ARG PYTHON=3.11
FROM python:${PYTHON}-slim AS build
ARG VARIANT=cpu
WORKDIR /src
# a C compiler for the incremental BPE extension (app/tokenization/incremental_bpe/_core.c)
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
# The whole tree (.dockerignore leaves out caches, builds and tests): a package folder left
# out of a list here would be missing at startup.
COPY . .
RUN python -m venv /opt/toksplice \
 && /opt/toksplice/bin/pip install --no-cache-dir --upgrade pip \
 && if [ "$VARIANT" = "gpu" ]; then EXTRA="[gpu]"; else EXTRA=""; fi \
 && /opt/toksplice/bin/pip install --no-cache-dir ".${EXTRA}"

FROM python:${PYTHON}-slim
COPY --from=build /opt/toksplice /opt/toksplice
RUN useradd --system --uid 10001 --no-create-home toksplice
USER toksplice
ENV PATH=/opt/toksplice/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    TOKSPLICE_HOST=0.0.0.0 \
    TOKSPLICE_PORT=8000
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request,sys; \
urllib.request.urlopen('http://127.0.0.1:8000/health/live', timeout=4)" || exit 1
ENTRYPOINT ["toksplice", "serve"]
