"""The Dockerfile, followed step by step without Docker (tests/helpers/deploy_steps.py), gives an
image whose command chats: its COPY steps into scratch folders, its RUN steps (pip included) with
a fresh virtualenv as the image's Python, then its CMD from its WORKDIR with its ENV, fed a line.

The slowest test of the suite (a fresh install of Mnemo's dependencies, about a minute): the
wheels of the lock's versions are built once into .pytest_cache and reused.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from packaging.utils import canonicalize_name

from bot.storage.bundled.server import EmbeddedMongo
from tests.helpers.deploy_steps import (
    SYSTEM_PATH,
    DockerfileFollower,
    Image,
    Stage,
    follow_shell_steps,
    free_port,
    make_shims,
    parse_unit,
    remove_in_background,
    rooted,
    snapshot,
    user_home,
    wheelhouse,
)
from tests.helpers.doc_snippets import snippet
from tests.helpers.shipped_plugins import shipped_plugins
from tests.paths import REPO

# The first test here builds the wheelhouse (a `pip wheel` of the whole lock, allowed 1,200 s
# on its own) before its steps run: above the e2e tier's limit (tests/conftest.py).
pytestmark = [pytest.mark.timeout(1800), pytest.mark.slow]


@pytest.fixture(scope="module")
def wheels(request: pytest.FixtureRequest) -> Path:
    return wheelhouse(REPO, Path(request.config.cache.mkdir("deploy-wheels")))


@pytest.fixture(scope="module")
def image(
    wheels: Path, model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Image]:
    scratch = tmp_path_factory.mktemp("docker")

    def chromadb_downloaded(stage: Stage) -> None:
        """FETCH_MODEL=1 asks chromadb to download the model into its cache; no internet
        here, so the cache is filled with the same files first, and the step copies them."""
        cache = stage.path(stage.home()) / ".cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx"
        shutil.copytree(model_dir, cache)

    follower = DockerfileFollower(
        REPO,
        scratch,
        build_args={},  # the defaults, FETCH_MODEL=1 included
        # Where pip finds packages: the lock's wheels only, never the machine's pip settings.
        step_env={
            "PIP_CONFIG_FILE": "/dev/null",
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(wheels),
            # Only faster: no bytecode compiled for the thousands of installed modules.
            "PIP_NO_COMPILE": "1",
        },
        before_run={"locate_model_dir": chromadb_downloaded},
    )
    yield follower.follow((REPO / "Dockerfile").read_text(encoding="utf-8"))
    remove_in_background(scratch)


def _start(image: Image, command: list[str], **extra: str) -> subprocess.Popen[str]:
    stage = image.stage
    return subprocess.Popen(
        command,
        cwd=stage.path(stage.workdir),
        env=stage.process_env(extra),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_image_installs_the_wheel_with_the_lock_and_reads_nothing_beside_it(
    image: Image,
) -> None:
    stage = image.stage
    python = stage.venv / "bin" / "python"
    shown = subprocess.run(
        [
            str(python),
            "-c",
            "import bot, json, importlib.metadata as m;"
            " from bot.config.settings import BUILTIN_CHARACTERS;"
            "print(json.dumps([bot.__file__, str(BUILTIN_CHARACTERS), m.version('openai'),"
            " m.version('nx-27017')]))",
        ],
        cwd=stage.path(stage.workdir),
        capture_output=True,
        text=True,
        check=True,
    )
    package, characters, openai_version, nx_version = json.loads(shown.stdout)
    site = str(stage.venv / "lib")
    assert package.startswith(site) and characters.startswith(site), (package, characters)
    assert (Path(characters) / "mnemo.json").is_file()
    locked = {
        canonicalize_name(name): pinned
        for name, pinned in (
            line.split("==")
            for line in (REPO / "constraints.txt").read_text().splitlines()
            if "==" in line and not line.startswith("#")
        )
    }
    assert (openai_version, nx_version) == (locked["openai"], locked["nx-27017"])
    # Everything installed is what `make run` installs: the lock's version of each package
    # (pip and setuptools are the base image's own).
    listed = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, json;"
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    installed = {
        canonicalize_name(name): found for name, found in json.loads(listed.stdout).items()
    }
    assert installed.pop("mnemo-bot") == "0.1.0"
    unlocked = {
        name: found
        for name, found in installed.items()
        if name not in ("pip", "setuptools", "wheel") and locked.get(name) != found
    }
    assert not unlocked, f"installed at other versions than the lock's: {unlocked}"
    # The source folder and the wheel are gone; the working folder holds nothing to read.
    assert not stage.path("/wheels").exists()
    assert list(stage.path(stage.workdir).iterdir()) == []
    assert (stage.path("/models") / "model.onnx").is_file()  # FETCH_MODEL=1 kept the model
    assert not (stage.path(stage.home()) / ".cache" / "chroma").exists()


def test_the_image_command_chats_from_its_working_folder_with_its_environment(
    image: Image,
) -> None:
    """No platform token: `mnemo run` (the CMD) is the console chat. The metrics port is the
    only change to the ENV (the test machine is shared); the health check asks it."""
    port = free_port()
    stage = image.stage
    before = sorted(stage.path(stage.workdir).rglob("*"))
    bot = _start(image, image.cmd, MNEMO_METRICS_PORT=str(port))
    assert bot.stdin is not None and bot.stdout is not None
    banner = [bot.stdout.readline() for _ in range(6)]
    assert banner[0].startswith("No DISCORD_TOKEN or TELEGRAM_TOKEN set"), banner
    assert f"plugins: {shipped_plugins()} (built-in)" in "".join(banner), banner
    health = json.loads(
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10).read()
    )
    assert health["status"] == "ok", health
    assert f"127.0.0.1:{image.stage.env['MNEMO_METRICS_PORT']}/healthz" in image.healthcheck
    said = "Hi, my name is Sarah and I live in Seattle.\n/facts\n"
    out, err = bot.communicate(said, timeout=180)
    assert bot.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    lines = out.splitlines()
    assert "Mnemo: Nice to meet you, Sarah. Seattle — noted." in lines, out
    assert any("Sarah lives in Seattle" in line for line in lines), out
    # What it wrote, it wrote in the data volume; the working folder is as the image left it.
    assert (stage.path("/data") / "mongo").is_dir()
    assert "/data" in image.volumes
    assert sorted(stage.path(stage.workdir).rglob("*")) == before


def test_the_systemd_install_steps_and_unit_chat_writing_only_where_allowed(
    wheels: Path, model_dir: Path, tmp_path: Path
) -> None:
    """docs/deploy.md section 1, as a root prompt would run it (stand-ins for useradd, sudo
    and git clone; pip from the lock's wheels), then the unit: every folder it names exists
    (else systemd stops with 226/NAMESPACE), and its ExecStart, from its WorkingDirectory with
    its Environment=, chats and writes nothing outside ReadWritePaths= (ProtectSystem=strict)."""
    deploy = REPO / "docs" / "deploy.md"
    steps = snippet(deploy, "systemd-install").text
    unit_text = snippet(deploy, "systemd-unit").text
    steps = steps.replace("https://github.com/<you>/mnemo", "https://github.com/example/mnemo")
    root = tmp_path / "machine"
    shims = make_shims(tmp_path / "shims", root, REPO)
    unit = parse_unit(unit_text)
    [user] = unit["User"]

    def chromadb_downloaded() -> None:
        """The doctor step fetches the model into the user's cache; no internet here."""
        cache = user_home(root, user) / ".cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx"
        if not cache.exists():
            shutil.copytree(model_dir, cache)

    follow_shell_steps(
        steps,
        root,
        shims,
        step_env={
            "PIP_CONFIG_FILE": "/dev/null",
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(wheels),
            # Only faster: no bytecode compiled for the thousands of installed modules.
            "PIP_NO_COMPILE": "1",
        },
        before_step={" doctor": chromadb_downloaded},
    )

    writable = [
        Path(rooted(path, root))
        for paths in unit.get("ReadWritePaths", [])
        for path in paths.split()
    ]
    writable += [root / "var/lib" / name for name in unit.get("StateDirectory", [])]
    for name in unit.get("StateDirectory", []):
        (root / "var/lib" / name).mkdir(parents=True, exist_ok=True)  # systemd makes it
    missing = [str(path.relative_to(root)) for path in writable if not path.is_dir()]
    assert not missing, f"the unit names folders no step creates (226/NAMESPACE): {missing}"
    [workdir] = unit["WorkingDirectory"]
    assert Path(rooted(workdir, root)).is_dir()
    assert unit["ProtectSystem"] == ["strict"]

    port = free_port()
    env = {"PATH": SYSTEM_PATH, "HOME": str(user_home(root, user)), "LANG": "C.UTF-8"}
    for assignment in unit.get("Environment", []):
        name, value = assignment.split("=", 1)
        env[name] = rooted(value, root)
    env["MNEMO_METRICS_PORT"] = str(port)  # the machine is shared
    before = snapshot(root, writable)
    [exec_start] = unit["ExecStart"]
    chat = subprocess.run(
        shlex.split(rooted(exec_start, root)),
        input="Hi, my name is Sarah and I live in Seattle.\n/facts\n",
        cwd=rooted(workdir, root),
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert chat.returncode == 0, chat.stderr[-3000:]
    lines = chat.stdout.splitlines()
    assert "Mnemo: Nice to meet you, Sarah. Seattle — noted." in lines, chat.stdout
    assert any("Sarah lives in Seattle" in line for line in lines), chat.stdout
    after = snapshot(root, writable)
    written = sorted(name for name in after if after[name] != before.get(name))
    assert not written, f"written outside ReadWritePaths= (read-only under systemd): {written}"
    assert (writable[0] / "mongo").is_dir(), "the data went elsewhere"
    remove_in_background(root)


def test_compose_runs_chroma_from_the_image_and_the_bot_against_it(
    image: Image, tmp_path: Path
) -> None:
    """compose.yaml's chroma service (`chroma run` from the bot's image, waited for through
    its health check) and its bot service (the image's CMD with the service's environment),
    each with its named volume. Ports are free ones (the machine is shared). mongo:7.0 cannot
    run here: nx-27017 on its own stands in for it, and the URI loses `replicaSet=rs0`."""
    compose = yaml.safe_load((REPO / "compose.yaml").read_text(encoding="utf-8"))
    services = compose["services"]
    chroma_service, bot_service = services["chroma"], services["bot"]
    assert chroma_service["image"] == bot_service["image"] and "build" in bot_service
    stage = image.stage
    volumes = tmp_path / "volumes"

    def mounted(service: dict[str, object], text: str) -> str:
        """`text` with the service's volume mounts (`name:/target`) and the image's folders
        moved to where they are here."""
        for volume in service.get("volumes", []):  # type: ignore[union-attr]
            name, target = str(volume).split(":", 1)
            if text == target or text.startswith(target + "/"):
                (volumes / name).mkdir(parents=True, exist_ok=True)
                return str(volumes / name) + text[len(target) :]
        return stage.rooted(text)

    chroma_port = free_port()
    container_port = chroma_service["command"][chroma_service["command"].index("--port") + 1]
    command = [
        str(chroma_port) if word == container_port else mounted(chroma_service, word)
        for word in chroma_service["command"]
    ]
    chroma = subprocess.Popen(
        command,
        cwd=stage.path(stage.workdir),
        env=stage.process_env({}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    mongo = EmbeddedMongo(tmp_path / "mongo-stand-in")
    asyncio.run(mongo.start())
    try:
        health = [
            word.replace(f"127.0.0.1:{container_port}/", f"127.0.0.1:{chroma_port}/")
            for word in chroma_service["healthcheck"]["test"][1:]
        ]
        assert chroma_service["healthcheck"]["test"][0] == "CMD"
        deadline = time.monotonic() + 90
        while subprocess.run(health, env=stage.process_env({}), capture_output=True).returncode:
            assert chroma.poll() is None, "chroma run exited"
            assert time.monotonic() < deadline, "the chroma service never became healthy"
            time.sleep(0.5)

        environment = {k: str(v) for k, v in bot_service["environment"].items()}
        assert environment["CHROMA_HOST"] == "chroma"
        assert environment["CHROMA_PORT"] == container_port
        environment["CHROMA_HOST"], environment["CHROMA_PORT"] = "127.0.0.1", str(chroma_port)
        mongo_host = mongo.uri.split("://", 1)[1].split("/", 1)[0]
        environment["MONGODB_URI"] = (
            environment["MONGODB_URI"]
            .replace("mongo:27017", mongo_host)
            .replace("?replicaSet=rs0", "")
        )
        environment["MNEMO_DATA_DIR"] = mounted(bot_service, environment["MNEMO_DATA_DIR"])
        environment["MNEMO_METRICS_PORT"] = str(free_port())
        bot = _start(image, image.cmd, **environment)
        out, err = bot.communicate(
            "Hi, my name is Sarah and I live in Seattle.\n/facts\n", timeout=180
        )
    finally:
        chroma.terminate()
        chroma.wait(timeout=30)
        asyncio.run(mongo.stop())
    assert bot.returncode == 0, err[-3000:]
    assert "storage: MongoDB at MONGODB_URI" in out, out
    lines = out.splitlines()
    assert "Mnemo: Nice to meet you, Sarah. Seattle — noted." in lines, out
    assert any("Sarah lives in Seattle" in line for line in lines), out
    # The vectors went to the chroma service's volume, nothing local in the bot's.
    assert list((volumes / "chroma-data" / "chroma").glob("*.sqlite3"))
    bot_data = volumes / "bot-data"
    assert not (bot_data / "chroma").exists() and not (bot_data / "mongo").exists()
