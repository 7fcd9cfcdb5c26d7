"""Follows a Dockerfile's steps without Docker, so a test can check that the image it describes
installs Mnemo and starts (tests/e2e/test_deploy_steps.py).

Each stage's file system is a scratch folder: every absolute path in a step (`/data`, `/wheels`,
`/home/mnemo`) is rewritten to the same path under that folder. Each stage's Python is a fresh
virtualenv standing in for the base image's. COPY copies from the checkout (minus what
.dockerignore leaves out) or from an earlier stage; RUN runs in `sh` with the stage's ENV and
ARGs, its working folder and the virtualenv first on PATH. What needs root is stood in for by
small commands: `useradd` only makes the home folder, `chown` does nothing. An instruction
this module does not know fails the test, so the Dockerfile cannot grow a step that is skipped.

Where pip finds packages is the test's choice (a wheelhouse of the lock's versions, reused
between runs), as a registry mirror would be for a real build.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass, field
from pathlib import Path

# An absolute path in a step: not part of a URL (`http://host:9464/healthz`) or of a longer
# path. Rewritten under the stage's scratch folder.
_ABSOLUTE = re.compile(r"(?<![\w.:/~$-])/(?=[\w.])")
# The base images the steps may name, and the Python each stands for.
PYTHON_IMAGES = {"python:3.11-slim": (3, 11)}
# A clean PATH as in the image, after the virtualenv's bin and the stand-in commands.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class Instruction:
    keyword: str
    text: str  # the arguments, continuation lines joined


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions in order; comment lines dropped (Docker drops them inside a continuation
    too), and a backslash continuation joined to the next line as Docker does (both gone)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    instructions: list[Instruction] = []
    pending = ""
    for line in lines:
        if not pending and not line.strip():
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1]
            continue
        whole = (pending + line).strip()
        pending = ""
        keyword, _, rest = whole.partition(" ")
        instructions.append(Instruction(keyword.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def parse_env(text: str) -> dict[str, str]:
    """`ENV A=1 B="two words"` (or the old `ENV A value`)."""
    words = shlex.split(text.replace("\n", " "))
    if words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    return dict(word.split("=", 1) for word in words)


def dockerignore(repo: Path) -> list[str]:
    path = repo / ".dockerignore"
    if not path.is_file():
        return []
    return [
        line.strip().removeprefix("/")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]


def _ignored(relative: str, patterns: list[str]) -> bool:
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(relative, bare):
            return True
        if pattern.startswith("**/") and fnmatch.fnmatch(relative.rsplit("/", 1)[-1], bare):
            return True
    return False


@dataclass
class Stage:
    name: str
    root: Path  # the stage's "/"
    venv: Path  # its Python
    shims: Path  # useradd, chown
    env: dict[str, str] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str = "root"

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")

    def rooted(self, text: str) -> str:
        """Every absolute path in `text` moved under the stage's folder."""
        return _ABSOLUTE.sub(f"{self.root}/", text)

    def home(self) -> str:
        return "/root" if self.user == "root" else f"/home/{self.user}"

    def process_env(self, extra: dict[str, str]) -> dict[str, str]:
        """The environment a step or the CMD sees: the image's, paths moved under the stage."""
        env = {
            "PATH": f"{self.venv / 'bin'}:{self.shims}:{SYSTEM_PATH}",
            "HOME": str(self.path(self.home())),
            "LANG": "C.UTF-8",
        }
        env.update({name: self.rooted(value) for name, value in self.env.items()})
        env.update(extra)
        return env


@dataclass
class Image:
    """What following the Dockerfile left: the last stage, its CMD and what it declared."""

    stage: Stage
    cmd: list[str]
    exposed: list[str]
    volumes: list[str]
    healthcheck: str


class DockerfileFollower:
    def __init__(
        self,
        repo: Path,
        scratch: Path,
        *,
        build_args: dict[str, str],
        step_env: dict[str, str],
        before_run: dict[str, object] | None = None,
    ) -> None:
        """`step_env` is added to every RUN (where pip finds packages); `before_run` maps a
        text a RUN step contains to a callable(stage) run first (a stand-in for a download)."""
        self.repo = repo
        self.scratch = scratch
        self.build_args = build_args
        self.step_env = step_env
        self.before_run = before_run or {}
        self.ignore = dockerignore(repo)
        self.stages: list[Stage] = []
        self.log: list[str] = []

    def follow(self, dockerfile: str) -> Image:
        cmd: list[str] = []
        exposed: list[str] = []
        volumes: list[str] = []
        healthcheck = ""
        global_args: dict[str, str] = {}
        for instruction in parse_dockerfile(dockerfile):
            keyword, text = instruction.keyword, instruction.text
            stage = self.stages[-1] if self.stages else None
            if keyword == "FROM":
                self._from(text, global_args)
            elif keyword == "ARG":
                name, _, default = text.partition("=")
                value = self.build_args.get(name, default)
                (stage.args if stage else global_args)[name] = value
            elif stage is None:
                raise AssertionError(f"{keyword} before FROM")
            elif keyword == "ENV":
                stage.env.update(parse_env(text))
            elif keyword == "WORKDIR":
                stage.workdir = str(Path(stage.workdir, text))
                stage.path(stage.workdir).mkdir(parents=True, exist_ok=True)
            elif keyword == "COPY":
                self._copy(stage, text)
            elif keyword == "RUN":
                self._run(stage, text)
            elif keyword == "USER":
                stage.user = text.split(":")[0]
            elif keyword == "CMD":
                cmd = shlex.split(text) if not text.startswith("[") else _json_list(text)
            elif keyword == "EXPOSE":
                exposed += text.split()
            elif keyword == "VOLUME":
                volumes += _json_list(text) if text.startswith("[") else text.split()
            elif keyword == "HEALTHCHECK":
                healthcheck = text
            elif keyword == "STOPSIGNAL":
                pass  # docker stop's signal; nothing to follow
            else:
                raise AssertionError(f"the test does not know the Dockerfile step {keyword}")
        assert self.stages, "no FROM"
        return Image(self.stages[-1], cmd, exposed, volumes, healthcheck)

    def _from(self, text: str, global_args: dict[str, str]) -> None:
        words = text.split()
        image = words[0]
        assert image in PYTHON_IMAGES, f"base image {image}: the test knows {list(PYTHON_IMAGES)}"
        wanted = PYTHON_IMAGES[image]
        assert sys.version_info[:2] == wanted, f"{image} is Python {wanted}, this is {sys.version}"
        index = len(self.stages)
        name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(index)
        root = self.scratch / f"stage-{name}"
        root.mkdir(parents=True)
        for folder in ("root", "tmp", "home"):
            (root / folder).mkdir()
        python = self.scratch / f"python-{name}"
        venv.EnvBuilder(with_pip=True).create(python)
        shims = make_shims(self.scratch / f"shims-{name}", root, self.repo)
        self.stages.append(Stage(name, root, python, shims, args=dict(global_args)))

    def _copy(self, stage: Stage, text: str) -> None:
        words = shlex.split(text)
        source_stage: Stage | None = None
        while words[0].startswith("--"):
            flag = words.pop(0)
            if flag.startswith("--from="):
                wanted = flag.removeprefix("--from=")
                [source_stage] = [s for s in self.stages if s.name == wanted]
            elif not flag.startswith(("--chown=", "--chmod=")):
                raise AssertionError(f"COPY flag {flag} is not known to the test")
        *sources, dest = words
        target = Path(stage.workdir, dest) if not dest.startswith("/") else Path(dest)
        into_folder = dest.endswith("/") or len(sources) > 1
        for source in sources:
            origin = self.repo / source if source_stage is None else source_stage.path(source)
            assert origin.exists(), f"COPY {source}: not found"
            where = stage.path(str(target))
            if origin.is_dir():
                # A folder's contents go into the target, as Docker does.
                shutil.copytree(
                    origin,
                    where,
                    dirs_exist_ok=True,
                    ignore=None if source_stage else self._ignore_for(origin),
                )
            else:
                where = where / origin.name if into_folder else where
                where.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, where)
        self.log.append(f"COPY {text}")

    def _ignore_for(self, origin: Path) -> object:
        def ignore(folder: str, names: list[str]) -> set[str]:
            relative = Path(folder).relative_to(self.repo)
            return {
                name
                for name in names
                if _ignored((relative / name).as_posix().removeprefix("./"), self.ignore)
            }

        return ignore

    def _run(self, stage: Stage, text: str) -> None:
        for marker, prepare in self.before_run.items():
            if marker in text:
                prepare(stage)  # type: ignore[operator]
        command = stage.rooted(text)
        env = stage.process_env({**stage.args, **self.step_env})
        done = subprocess.run(
            ["sh", "-ec", command],
            cwd=stage.path(stage.workdir),
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        self.log.append(f"RUN {text}")
        assert done.returncode == 0, f"RUN {text}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


# Stand-ins for the commands that need root or the network, written as small Python scripts.
# Each knows the scratch folder standing for "/" (ROOT) and the checkout (REPO).
_SHIM = """#!{python}
import os, shutil, sys
ROOT, REPO = {root!r}, {repo!r}
PASSWD = os.path.join(ROOT, "etc", "passwd-of-the-test")
command, args = os.path.basename(sys.argv[0]), sys.argv[1:]


def homes():
    if not os.path.exists(PASSWD):
        return {{}}
    with open(PASSWD) as lines:
        return dict(line.rstrip("\\n").split(":", 1) for line in lines)


if command == "chown":
    sys.exit(0)  # ownership: the test runs as one user
if command == "useradd":
    # Records the user and makes its home (--create-home), as root would.
    name, home = args[-1], os.path.join(ROOT, "home", args[-1])
    if "--home-dir" in args:
        home = args[args.index("--home-dir") + 1]
    if "--create-home" in args:
        os.makedirs(home, exist_ok=True)
    os.makedirs(os.path.dirname(PASSWD), exist_ok=True)
    with open(PASSWD, "a") as lines:
        lines.write(f"{{name}}:{{home}}\\n")
    sys.exit(0)
if command == "sudo":
    # `sudo -u USER [-H] command...`: the command, with the user's HOME (as sudo sets it).
    env = dict(os.environ)
    while args and args[0].startswith("-"):
        option = args.pop(0)
        if option == "-u":
            user = args.pop(0)
            env["HOME"] = homes()[user]
        elif option != "-H":
            sys.exit(f"sudo stand-in: option {{option}} is not known to the test")
    os.execvpe(args[0], args, env)
if command == "git":
    # `git clone URL DEST`: the checkout under test, as a clone of it would hold.
    assert args[0] == "clone", args
    # As tests/helpers/checkout_copy.py does: the run-time folders only at the top.
    sources = shutil.ignore_patterns(
        ".git", ".venv*", "__pycache__", "build", "dist", "*.egg-info", ".pytest_cache",
        ".ruff_cache",
    )
    def ignored(folder, names):
        top = {{"data", ".env", "bench-results"}} & set(names) if folder == REPO else set()
        return set(sources(folder, names)) | top
    shutil.copytree(REPO, args[-1], ignore=ignored)
    sys.exit(0)
if command.startswith("python3"):
    os.execv({python!r}, [{python!r}, *args])
sys.exit(f"no stand-in for {{command}}")
"""
_SHIMS = ("chown", "useradd", "sudo", "git", "python3.11")


def make_shims(folder: Path, root: Path, repo: Path) -> Path:
    folder.mkdir(parents=True)
    script = folder / "shim.py"
    script.write_text(
        _SHIM.format(python=sys.executable, root=str(root), repo=str(repo)), encoding="utf-8"
    )
    script.chmod(0o755)
    for name in _SHIMS:
        (folder / name).symlink_to(script)
    return folder


def user_home(root: Path, user: str) -> Path:
    """The home the stand-in `useradd` gave `user` (an absolute path under `root`)."""
    passwd = root / "etc" / "passwd-of-the-test"
    homes = dict(line.split(":", 1) for line in passwd.read_text().splitlines())
    return Path(homes[user])


def _json_list(text: str) -> list[str]:
    import json

    value = json.loads(text)
    assert isinstance(value, list)
    return [str(item) for item in value]


def wheelhouse(repo: Path, folder: Path) -> Path:
    """Wheels of the lock's versions of Mnemo's runtime dependencies and of its build
    requirements, built once (through the machine's own pip configuration: the registry) and
    reused while the lock and those requirements are unchanged."""
    import hashlib
    import tomllib

    project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    # pip too: the Dockerfile and docs/deploy.md install the lock's pip first.
    wanted = [*project["project"]["dependencies"], *project["build-system"]["requires"], "pip"]
    key = hashlib.sha256(
        (repo / "constraints.txt").read_bytes() + "\n".join(wanted).encode()
    ).hexdigest()[:16]
    house = folder / key
    if (house / ".complete").is_file():
        return house
    shutil.rmtree(house, ignore_errors=True)
    house.mkdir(parents=True)
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--constraint",
            str(repo / "constraints.txt"),
            "--wheel-dir",
            str(house),
            *wanted,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (house / ".complete").touch()
    return house


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rooted(text: str, root: Path) -> str:
    """Every absolute path in `text` moved under `root`."""
    return _ABSOLUTE.sub(f"{root}/", text)


def follow_shell_steps(
    block: str,
    root: Path,
    shims: Path,
    *,
    step_env: dict[str, str],
    before_step: dict[str, object] | None = None,
) -> None:
    """Each line of a shell block, as an operator types it at a root prompt, in `sh` with
    the absolute paths under `root` and the stand-ins first on PATH."""
    home = root / "root"
    home.mkdir(parents=True, exist_ok=True)
    for line in block.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        for marker, prepare in (before_step or {}).items():
            if marker in line:
                prepare()  # type: ignore[operator]
        env = {"PATH": f"{shims}:{SYSTEM_PATH}", "HOME": str(home), "LANG": "C.UTF-8"}
        env.update(step_env)
        done = subprocess.run(
            ["sh", "-ec", rooted(line, root)],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def parse_unit(text: str) -> dict[str, list[str]]:
    """A systemd unit's settings (every section), each key with its values in order."""
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def snapshot(root: Path, skip: list[Path]) -> dict[str, tuple[int, int]]:
    """Every file under `root` but those under `skip`, with its size and modification time.
    Compiled bytecode is left out: Python skips writing it where it may not."""
    files: dict[str, tuple[int, int]] = {}
    for folder, names, filenames in os.walk(root):
        here = Path(folder)
        names[:] = [n for n in names if here / n not in skip and n != "__pycache__"]
        for name in filenames:
            path = here / name
            if path.suffix == ".pyc":
                continue
            stat = path.lstat()
            files[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return files


def remove_in_background(folder: Path) -> None:
    """Delete a scratch install (a gigabyte of small files, close to a minute on a busy disk)
    without the suite waiting for it."""
    subprocess.Popen(
        ["rm", "-rf", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
