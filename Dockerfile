# Mnemo as a container: the README's own install (`pip install .`, runtime dependencies only),
# on a slim Python, run by a user without privileges. Not built on the machine these files
# were written on (it cannot pull images); see docs/deploy.md.
#
#   docker build -t mnemo-bot .                          # fetches the embedding model once
#   docker build --build-arg FETCH_MODEL=0 -t mnemo-bot . # no model: mount one at /models
FROM python:3.11-slim

ARG FETCH_MODEL=1
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 mnemo \
    && mkdir -p /data /models \
    && chown mnemo:mnemo /data /models

WORKDIR /app
# Dependencies first, so editing the code does not reinstall them.
COPY pyproject.toml README.md ./
COPY bot ./bot
RUN pip install .
# The persona and the built-in plugins are read from the working folder, as in a checkout.
COPY characters ./characters
COPY plugins ./plugins

USER mnemo
# all-MiniLM-L6-v2 (~90 MB) fetched through Mnemo's own locator (chromadb's download) and
# kept in /models, so the container starts without network. With FETCH_MODEL=0, mount the
# folder holding model.onnx and tokenizer.json at /models instead.
RUN if [ "$FETCH_MODEL" = "1" ]; then \
      python -c "import shutil; from bot.knowledge.onnx_embedder import locate_model_dir; \
shutil.copytree(locate_model_dir(None), '/models', dirs_exist_ok=True)" \
      && rm -rf /home/mnemo/.cache/chroma; \
    fi

ENV MNEMO_DATA_DIR=/data \
    MNEMO_EMBEDDING_MODEL_DIR=/models \
    MNEMO_LOG_FORMAT=json \
    MNEMO_METRICS_PORT=9464 \
    MNEMO_METRICS_HOST=0.0.0.0
VOLUME ["/data"]
EXPOSE 9464
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=4)"
# `docker stop` then shuts down like Ctrl-C: evaluations get a few seconds, the rest resume.
STOPSIGNAL SIGINT
CMD ["mnemo", "run"]
