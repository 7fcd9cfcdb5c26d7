"""The deployment files cannot be built here (no image pulls), so what can drift is checked:
every setting they set is one Mnemo reads, with a value it accepts; every file they copy
exists; the ports agree; the commands they run exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from bot.app.cli import build_parser
from bot.config.settings import environment_variables, load_settings
from tests.helpers.doc_snippets import snippet
from tests.paths import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text(encoding="utf-8")
COMPOSE = yaml.safe_load((REPO / "compose.yaml").read_text(encoding="utf-8"))
DEPLOY_DOC = REPO / "docs" / "deploy.md"
# Variables Python and pip read, not Mnemo's settings.
NOT_SETTINGS = {
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED",
    "PIP_NO_CACHE_DIR",
    "PIP_DISABLE_PIP_VERSION_CHECK",
}


def is_a_command(*words: str) -> bool:
    try:
        build_parser().parse_args(list(words))
    except SystemExit:
        return False
    return True


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for block in re.findall(r"^ENV (.+?)(?<!\\)$", DOCKERFILE, re.MULTILINE | re.DOTALL):
        for pair in shlex.split(block.replace("\\\n", " ")):
            name, _, value = pair.partition("=")
            env[name] = value
    return env


def systemd_unit() -> str:
    return snippet(DEPLOY_DOC, "systemd-unit").text


def unit_env() -> dict[str, str]:
    return dict(
        line.removeprefix("Environment=").split("=", 1)
        for line in systemd_unit().splitlines()
        if line.startswith("Environment=")
    )


@pytest.mark.parametrize(
    "source",
    ["Dockerfile", "compose.yaml", "systemd unit"],
)
def test_the_settings_they_set_exist_and_load(
    source: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = {
        "Dockerfile": dockerfile_env,
        "compose.yaml": lambda: {
            k: str(v) for k, v in COMPOSE["services"]["bot"]["environment"].items()
        },
        "systemd unit": unit_env,
    }[source]()
    mnemo = {k: v for k, v in env.items() if k not in NOT_SETTINGS}
    unknown = set(mnemo) - set(environment_variables())
    assert not unknown, f"{source} sets variables Mnemo does not read: {sorted(unknown)}"
    monkeypatch.chdir(tmp_path)
    for name, value in mnemo.items():
        monkeypatch.setenv(name, value)
    load_settings(env_file=None)  # a bad value would raise ConfigError naming it


def test_the_dockerfile_copies_what_exists_and_runs_a_real_command() -> None:
    # From the checkout; `COPY --from=<stage>` copies what an earlier stage made.
    for sources in re.findall(r"^COPY (?!--from=)(.+) \S+$", DOCKERFILE, re.MULTILINE):
        for source in sources.split():
            assert (REPO / source).exists(), f"Dockerfile copies missing {source}"
    [command] = re.findall(r'^CMD \["mnemo", "(\w+)"\]', DOCKERFILE, re.MULTILINE)
    assert is_a_command(command)
    # The health check asks the port the metrics server listens on.
    port = dockerfile_env()["MNEMO_METRICS_PORT"]
    assert f"127.0.0.1:{port}/healthz" in DOCKERFILE
    assert f"EXPOSE {port}" in DOCKERFILE


def test_compose_wires_the_bot_to_its_services() -> None:
    services = COMPOSE["services"]
    bot = services["bot"]["environment"]
    assert bot["MONGODB_URI"].startswith("mongodb://mongo:27017/")
    assert "replicaSet=rs0" in bot["MONGODB_URI"]
    assert "rs0" in services["mongo"]["command"]
    assert bot["CHROMA_HOST"] == "chroma"
    chroma = services["chroma"]["command"]
    assert chroma[:2] == ["chroma", "run"]
    assert chroma[chroma.index("--port") + 1] == bot["CHROMA_PORT"]
    assert services["bot"]["ports"] == [f"127.0.0.1:{bot['MNEMO_METRICS_PORT']}:9464"]
    assert bot["MNEMO_METRICS_PORT"] == "9464"


def test_compose_builds_its_one_image_once() -> None:
    # Two `build:` sections of one image build it twice on every `docker compose up --build`.
    services = COMPOSE["services"]
    builders = [name for name, service in services.items() if "build" in service]
    assert builders == ["bot"]
    built = services["bot"]["image"]
    users = sorted(name for name, service in services.items() if service.get("image") == built)
    assert users == ["bot", "chroma"]
    # The image exists only here: the service that runs it without building never pulls it.
    assert services["chroma"]["pull_policy"] == "never"


def test_the_systemd_unit_runs_real_commands() -> None:
    assert not is_a_command("no-such-command")
    for line in systemd_unit().splitlines():
        if line.startswith("ExecStart="):
            words = shlex.split(line.removeprefix("ExecStart="))
            assert words[0].endswith("/mnemo")
            assert is_a_command(*words[1:])
