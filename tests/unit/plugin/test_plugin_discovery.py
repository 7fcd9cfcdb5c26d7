"""Plugin discovery over throwaway folders: order, skipping, every way a plugin can be broken,
plugin settings, relative imports, and many folders in one process without clashes."""

from __future__ import annotations

import sys
import textwrap
import uuid
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from bot import Evaluator, Plugin, Provider
from bot.plugin import loading as plugins_module
from bot.plugin.loading import PluginError, Registry, discover

HEADER = "from bot import Action, Evaluator, Plugin, Provider\n\n"


def simple_plugin(
    name: str, *, evaluators: tuple[str, ...] = (), providers: tuple[str, ...] = ()
) -> str:
    """Source of a plugin module with the named evaluators and providers."""
    lines = [
        HEADER,
        "async def handle(ctx, found):\n    return None\n\n",
        "async def get(ctx):\n    return ''\n\n",
    ]
    evals = ", ".join(f"Evaluator(name={e!r}, description='d', handler=handle)" for e in evaluators)
    provs = ", ".join(f"Provider(name={p!r}, get=get)" for p in providers)
    lines.append(f"plugin = Plugin(name={name!r}, evaluators=[{evals}], providers=[{provs}])\n")
    return "".join(lines)


def put(folder: Path, relative: str, source: str) -> Path:
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "plugins"
    path.mkdir()
    return path


def load(folder: Path, **options: object) -> Registry:
    return discover(folder, use_entry_points=False, **options)  # type: ignore[arg-type]


def test_happy_path_in_file_name_order_with_private_files_skipped(folder: Path) -> None:
    put(folder, "b_second.py", simple_plugin("second", evaluators=("B1", "B2")))
    put(folder, "a_first.py", simple_plugin("zeta", evaluators=("A1",), providers=("time",)))
    put(folder, "c_pkg/__init__.py", simple_plugin("third", evaluators=("C1",)))
    # Skipped: private and hidden names, non-Python files, folders without __init__.py.
    put(folder, "_template.py", "this is not python at all (\n")
    put(folder, ".hidden.py", "raise RuntimeError('hidden files are not plugins')\n")
    put(folder, "_shared/__init__.py", "raise RuntimeError('private packages are not plugins')\n")
    put(folder, "README.md", "# not a plugin\n")
    put(folder, "data/readme.txt", "nothing\n")

    registry = load(folder)

    assert [p.name for p in registry.plugins] == ["zeta", "second", "third"]
    assert [e.name for e in registry.evaluators] == ["A1", "B1", "B2", "C1"]
    assert [p.name for p in registry.providers] == ["time"]
    assert registry.plugin_of(registry.evaluators[1]).name == "second"
    assert registry.sources["third"].endswith("c_pkg")
    assert registry.settings == {}


def test_empty_or_missing_folder(tmp_path: Path) -> None:
    assert load(tmp_path / "nowhere").plugins == []
    (tmp_path / "empty").mkdir()
    assert load(tmp_path / "empty").plugins == []


def test_folder_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "plugins"
    path.write_text("", encoding="utf-8")
    with pytest.raises(PluginError, match="not a folder"):
        load(path)


def test_import_error_names_the_plugin_and_the_reason(folder: Path) -> None:
    put(folder, "weather.py", "import no_such_module_for_mnemo\n")
    with pytest.raises(PluginError) as caught:
        load(folder)
    message = str(caught.value)
    assert message.startswith("plugin weather (")
    assert "failed to import: ModuleNotFoundError" in message
    assert "no_such_module_for_mnemo" in message


def test_exception_at_import_time(folder: Path) -> None:
    put(folder, "angry.py", "raise RuntimeError('database unreachable')\n")
    with pytest.raises(PluginError, match=r"plugin angry .*RuntimeError: database unreachable"):
        load(folder)


def test_syntax_error_names_the_file_and_line(folder: Path) -> None:
    put(folder, "typo.py", HEADER + "plugin = Plugin(name='typo'\n\ndef oops(:\n")
    with pytest.raises(PluginError) as caught:
        load(folder)
    message = str(caught.value)
    assert message.startswith("plugin typo (")
    assert "SyntaxError" in message and "typo.py" in message and "line" in message


def test_syntax_error_in_a_package_submodule(folder: Path) -> None:
    put(folder, "deep/__init__.py", "from .broken import X\n")
    put(folder, "deep/broken.py", "X = = 1\n")
    with pytest.raises(PluginError, match=r"plugin deep .*SyntaxError.*broken\.py"):
        load(folder)


def test_missing_plugin_attribute(folder: Path) -> None:
    put(folder, "empty.py", "VALUE = 1\n")
    with pytest.raises(PluginError, match=r"plugin empty .*defines no `plugin = Plugin\(\.\.\.\)`"):
        load(folder)


def test_plugin_of_the_wrong_type(folder: Path) -> None:
    put(folder, "wrong.py", "plugin = {'name': 'wrong'}\n")
    with pytest.raises(PluginError) as caught:
        load(folder)
    assert "wrong.py" in str(caught.value)
    assert "`plugin` is a dict, not a Plugin" in str(caught.value)


def test_duplicate_plugin_name(folder: Path) -> None:
    put(folder, "one.py", simple_plugin("facts"))
    put(folder, "two.py", simple_plugin("Facts"))
    with pytest.raises(PluginError) as caught:
        load(folder)
    message = str(caught.value)
    assert message.startswith("plugin Facts (")
    assert "two.py" in message and "already taken" in message and "one.py" in message


def test_duplicate_evaluator_name_across_plugins(folder: Path) -> None:
    put(folder, "one.py", simple_plugin("one", evaluators=("GET_FACTS",)))
    put(folder, "two.py", simple_plugin("two", evaluators=("get_facts",)))
    with pytest.raises(PluginError) as caught:
        load(folder)
    assert str(caught.value).startswith("plugin two (")
    assert "evaluator 'get_facts' repeats a name already registered by plugin one" in str(
        caught.value
    )


def test_duplicate_names_inside_one_plugin(folder: Path) -> None:
    put(folder, "twice.py", simple_plugin("twice", providers=("time", "time")))
    with pytest.raises(
        PluginError, match="provider 'time' repeats a name already registered by itself"
    ):
        load(folder)


def test_duplicate_action_name(folder: Path) -> None:
    source = HEADER + textwrap.dedent(
        """
        async def handle(ctx, found):
            return None

        remember = Action(name="REMEMBER", description="d", handler=handle)
        plugin = Plugin(name={name!r}, actions=[remember])
        """
    )
    put(folder, "a.py", source.replace("{name!r}", "'a'"))
    put(folder, "b.py", source.replace("{name!r}", "'b'"))
    with pytest.raises(PluginError, match="action 'REMEMBER' repeats a name"):
        load(folder)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            "def handle(ctx, found):\n    return None\n\n"
            "plugin = Plugin(name='p', evaluators=[Evaluator('E', 'd', handler=handle)])",
            "evaluator 'E' handler must be declared with `async def`",
        ),
        (
            "plugin = Plugin(name='p', evaluators=['not an evaluator'])",
            "evaluators[0] is a str, not Evaluator",
        ),
        ("plugin = Plugin(name='p', providers=Provider)", "providers must be a list"),
        ("plugin = Plugin(name='')", "the Plugin has no name"),
        ("plugin = Plugin(name='p', settings_model=dict)", "settings_model must be a pydantic"),
        (
            "async def get(ctx):\n    return ''\n\n"
            "plugin = Plugin(name='p', providers=[Provider(name=' ', get=get)])",
            "providers[0] has no name",
        ),
        (
            "async def forget(ctx, person, world):\n    return 0\n\n"
            "plugin = Plugin(name='p', stores=['scores'], forget=forget)",
            "it stores scores but has no export hook; a plugin that keeps data about people "
            "must let them forget and export it",
        ),
        ("plugin = Plugin(name='p', stores=['Bad Name'])", "stores entry 'Bad Name' is not"),
    ],
)
def test_malformed_plugins_are_refused_at_start_up(folder: Path, body: str, reason: str) -> None:
    put(folder, "p.py", HEADER + body + "\n")
    with pytest.raises(PluginError) as caught:
        load(folder)
    assert reason in str(caught.value)
    assert "p.py" in str(caught.value)


SETTINGS_PLUGIN = HEADER + textwrap.dedent(
    """
    from pydantic import SecretStr
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class WeatherSettings(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="MNEMO_WEATHER_", extra="ignore")
        max_items: int = 5
        api_key: SecretStr | None = None
        units: str = "metric"

    async def handle(ctx, found):
        return ctx.settings

    plugin = Plugin(
        name="weather",
        evaluators=[Evaluator(name="WEATHER", description="d", handler=handle)],
        settings_model=WeatherSettings,
    )
    """
)


def test_plugin_settings_are_read_at_discovery(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(folder, "weather.py", SETTINGS_PLUGIN)
    monkeypatch.setenv("MNEMO_WEATHER_MAX_ITEMS", "9")
    registry = load(folder)
    settings = registry.settings["weather"]
    assert settings.max_items == 9
    assert type(settings).__name__ == "WeatherSettings"
    assert registry.settings[registry.plugin_of(registry.evaluators[0]).name] is settings


def test_bad_plugin_setting_names_the_plugin_and_the_variable(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(folder, "weather.py", SETTINGS_PLUGIN)
    monkeypatch.setenv("MNEMO_WEATHER_MAX_ITEMS", "lots")
    with pytest.raises(PluginError) as caught:
        load(folder)
    message = str(caught.value)
    assert message.startswith("plugin weather (")
    assert "setting MNEMO_WEATHER_MAX_ITEMS: Input should be a valid integer" in message
    assert "\n" not in message


def test_plugin_settings_from_the_env_file(folder: Path, tmp_path: Path) -> None:
    put(folder, "weather.py", SETTINGS_PLUGIN)
    env = tmp_path / "mnemo.env"
    env.write_text("MNEMO_WEATHER_UNITS=imperial\n", encoding="utf-8")
    assert load(folder, env_file=env).settings["weather"].units == "imperial"


def test_plain_pydantic_settings_model(folder: Path) -> None:
    put(
        folder,
        "strict.py",
        HEADER
        + "from pydantic import BaseModel\n\nclass Needs(BaseModel):\n    required: int\n\n"
        + "plugin = Plugin(name='strict', settings_model=Needs)\n",
    )
    with pytest.raises(PluginError, match=r"plugin strict .*setting required: Field required"):
        load(folder)


def test_relative_imports_inside_a_plugin_package(folder: Path) -> None:
    put(folder, "memory/prompts.py", "TEMPLATE = 'Extract facts from {{recentMessages}}'\n")
    put(folder, "memory/parsing/__init__.py", "from .json import parse\n")
    put(folder, "memory/parsing/json.py", "def parse(text):\n    return [text]\n")
    put(
        folder,
        "memory/__init__.py",
        HEADER
        + textwrap.dedent(
            """
            from .prompts import TEMPLATE
            from .parsing import parse
            from . import prompts

            async def handle(ctx, found):
                return parse(TEMPLATE)

            plugin = Plugin(
                name="memory",
                description=prompts.TEMPLATE,
                evaluators=[Evaluator(name="MEMORY", description="d", handler=handle)],
            )
            """
        ),
    )
    # A plain module plugin can share a private helper of the folder.
    put(folder, "_helpers.py", "GREETING = 'hello'\n")
    put(
        folder,
        "greeter.py",
        HEADER
        + "from ._helpers import GREETING\n\n"
        + "plugin = Plugin(name='greeter', description=GREETING)\n",
    )
    registry = load(folder)
    assert [p.name for p in registry.plugins] == ["greeter", "memory"]
    assert registry.plugins[0].description == "hello"
    assert registry.plugins[1].description.startswith("Extract facts")


def test_many_folders_with_the_same_names_do_not_clash(tmp_path: Path) -> None:
    registries = []
    for index in range(5):
        folder = tmp_path / f"site{index}" / "plugins"
        put(folder, "echo.py", simple_plugin(f"echo{index}", evaluators=(f"E{index}",)))
        put(folder, "pkg/__init__.py", "from .inner import plugin\n")
        put(folder, "pkg/inner.py", simple_plugin(f"pkg{index}"))
        registries.append(load(folder))
    for index, registry in enumerate(registries):
        assert [p.name for p in registry.plugins] == [f"echo{index}", f"pkg{index}"]
    # Nothing was imported under the folders' shared bare name `plugins`.
    assert not [name for name in sys.modules if name.startswith("plugins.echo")]


def test_rediscovery_sees_the_folder_as_it_is_now(folder: Path) -> None:
    put(folder, "live.py", simple_plugin("first"))
    assert [p.name for p in load(folder).plugins] == ["first"]
    put(folder, "live.py", simple_plugin("second-version"))
    put(folder, "added.py", simple_plugin("added"))
    assert [p.name for p in load(folder).plugins] == ["added", "second-version"]
    put(folder, "live.py", "raise ImportError('now broken')\n")
    with pytest.raises(PluginError, match="now broken"):
        load(folder)


def test_importable_folder_keeps_its_own_package_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder already on the import path (like the repository's `plugins/`) is imported
    under its own name, so `plugins.facts` is one module however it is imported."""
    name = f"plugs_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / name
    put(folder, "facts.py", simple_plugin("facts"))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        registry = load(folder)
        module = __import__(f"{name}.facts", fromlist=["plugin"])
        assert registry.plugins[0] is module.plugin
    finally:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]


def test_disabled_plugins_are_not_imported(folder: Path) -> None:
    put(folder, "broken.py", "raise RuntimeError('never imported')\n")
    put(folder, "goals.py", simple_plugin("Goals"))
    put(folder, "facts_plugin.py", simple_plugin("facts"))
    registry = load(folder, disabled=["broken", "goals", " "])
    assert [p.name for p in registry.plugins] == ["facts"]
    # By the Plugin's own name too (any case).
    assert load(folder, disabled=["broken", "FACTS"]).plugins[0].name == "Goals"


def test_invalid_module_file_name(folder: Path) -> None:
    put(folder, "my-plugin.py", simple_plugin("dash"))
    with pytest.raises(PluginError, match="not a valid Python module name"):
        load(folder)


def test_entry_point_plugins_follow_folder_plugins(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"mnemo_ext_{uuid.uuid4().hex[:8]}"
    put(tmp_path / "site", f"{module}.py", simple_plugin("installed", evaluators=("EXT",)))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    put(folder, "local.py", simple_plugin("local"))
    installed = EntryPoint(name="installed", value=f"{module}:plugin", group="mnemo.plugins")
    as_module = EntryPoint(name="as_module", value=module, group="mnemo.plugins")
    seen: list[str] = []

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        seen.append(group)
        # Listed twice, as when a distribution is visible from two places on sys.path.
        return [installed, installed]

    monkeypatch.setattr(plugins_module, "entry_points", fake_entry_points)
    registry = discover(folder)
    assert seen == ["mnemo.plugins"]
    assert [p.name for p in registry.plugins] == ["local", "installed"]
    assert registry.sources["installed"] == f"entry point installed = {module}:plugin"

    # An entry point naming a module (not its `plugin`) works the same.
    monkeypatch.setattr(plugins_module, "entry_points", lambda *, group: [as_module])
    assert [p.name for p in discover(folder).plugins] == ["local", "installed"]

    broken = EntryPoint(name="broken", value="mnemo_no_such_module:plugin", group="mnemo.plugins")
    monkeypatch.setattr(plugins_module, "entry_points", lambda *, group: [broken])
    with pytest.raises(PluginError, match=r"plugin broken \(entry point .*ModuleNotFoundError"):
        discover(folder)
    assert [p.name for p in discover(folder, disabled=["broken"]).plugins] == ["local"]


def test_registry_add_in_code() -> None:
    async def handle(ctx: object, found: object) -> None:
        return None

    registry = Registry()
    registry.add(Plugin(name="a", evaluators=[Evaluator("E", "d", handle)]), "test")
    with pytest.raises(PluginError, match="already taken by the plugin from test"):
        registry.add(Plugin(name="A"), "elsewhere")
    with pytest.raises(PluginError):
        registry.add(Plugin(name="b", evaluators=[Evaluator("e", "d", handle)]), "test")
    # A refused plugin leaves the registry as it was.
    assert [p.name for p in registry.plugins] == ["a"]
    assert isinstance(registry.evaluators[0], Evaluator)
    assert Provider  # re-exported types stay importable


def test_disabling_a_plugin_that_does_not_exist_is_an_error_naming_the_known_ones(
    folder: Path,
) -> None:
    put(folder, "goals.py", simple_plugin("Goals"))
    put(folder, "facts_plugin.py", simple_plugin("facts"))
    # "sentimnet" would otherwise leave the plugin meant to be off running, silently.
    with pytest.raises(PluginError) as error:
        load(folder, disabled=["goals", "sentimnet"])
    message = str(error.value)
    assert "MNEMO_DISABLED_PLUGINS" in message and "sentimnet" in message
    assert "facts" in message and "goals" in message.casefold()
    assert "\n" not in message
