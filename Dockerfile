# Mnemo as a container: what `make run` installs (Mnemo's runtime dependencies at the versions
# of the lock, constraints.txt), from the wheel a release would publish, on a slim Python, run by
# a user without privileges. tests/e2e/test_deploy_steps.py follows these steps without Docker
# (each COPY into a scratch folder, each RUN with a fresh virtualenv as the image's Python) and
# chats with the result; the image itself is not built on the machine these files were written
# on (it cannot pull images); see docs/deploy.md.
#
#   docker build -t mnemo-bot .                          # fetches the embedding model once
#   docker build --build-arg FETCH_MODEL=0 -t mnemo-bot . # no model: mount one at /models

# Stage 1: the wheel. setup.py maps characters/ and plugins/ into the package (bot/_builtin), so
# the default character and the built-in plugins are inside the wheel; no copy of them is needed
# beside it.
FROM python:3.11-slim AS wheel
WORKDIR /src
COPY pyproject.toml setup.py README.md LICENSE constraints.txt ./
COPY bot ./bot
COPY characters ./characters
COPY plugins ./plugins
# The lock's pip, and the lock's setuptools for the build (--build-constraint, a pip 25.3
# option): the base image's pip and next month's setuptools change nothing.
RUN pip install --constraint constraints.txt pip \
    && pip wheel --no-deps --build-constraint constraints.txt --wheel-dir /wheels .

# Stage 2: the image.
FROM python:3.11-slim

ARG FETCH_MODEL=1
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 mnemo \
    && mkdir -p /data /models \
    && chown mnemo:mnemo /data /models

# The dependencies first, at the versions of the lock, so editing Mnemo's code reuses this layer.
COPY constraints.txt pyproject.toml /wheels/
RUN pip install --constraint /wheels/constraints.txt pip \
    && python -c "import tomllib; print(*tomllib.load(open('/wheels/pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" \
        > /wheels/requirements.txt \
    && pip install --constraint /wheels/constraints.txt --requirement /wheels/requirements.txt
COPY --from=wheel /wheels/ /wheels/
RUN pip install --constraint /wheels/constraints.txt /wheels/mnemo_bot-*.whl \
    && rm -rf /wheels

# Nothing is read from here: the character and the plugins come with the package. A folder of
# your own characters can be mounted at /app/characters (MNEMO_CHARACTER=name).
WORKDIR /app
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
