"""Configuration: defaults, the example file, precedence, and errors that name key and line."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel

from koogcli.config import loader
from koogcli.config.schema import CustomSpec, FilterSpec, RedactSpec, Settings, WindowSpec
from koogcli.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def load_text(tmp_path: Path, text: str, **kw: object) -> loader.LoadedConfig:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return loader.load(path, explicit=True, **kw)  # type: ignore[arg-type]


def _fields(model: type[BaseModel]) -> set[str]:
    names = set()
    for name, info in model.model_fields.items():
        names.add(info.alias or name)
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names |= _fields(annotation)
    return names


def test_example_file_validates_and_equals_the_defaults() -> None:
    example = ROOT / "config.example.toml"
    assert loader.validate_file(example) == Settings()


def test_example_file_mentions_every_key() -> None:
    text = (ROOT / "config.example.toml").read_text()
    every = _fields(Settings)
    for spec in (FilterSpec, WindowSpec, RedactSpec, CustomSpec):
        every |= _fields(spec)
    missing = [name for name in every if name not in text]
    assert missing == []


def test_missing_default_file_means_defaults(tmp_path: Path) -> None:
    cfg = loader.load(tmp_path / "absent.toml", explicit=False)
    assert cfg.settings == Settings() and not cfg.file_exists


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        loader.load(tmp_path / "absent.toml", explicit=True)


def test_precedence_defaults_file_env_flags(tmp_path: Path) -> None:
    text = '[llm]\nmodel = "from-file"\ntemperature = 0.1\n'
    assert load_text(tmp_path, text).settings.llm.model == "from-file"
    env = {"KOOG_MODEL": "from-env", "KOOG_TEMPERATURE": "0.3"}
    cfg = load_text(tmp_path, text, env=env)
    assert (cfg.settings.llm.model, cfg.settings.llm.temperature) == ("from-env", 0.3)
    assert cfg.provenance["llm.model"] == "env KOOG_MODEL"
    cfg = load_text(tmp_path, text, env=env, flags={"llm.model": "from-flag"})
    assert cfg.settings.llm.model == "from-flag"
    assert cfg.settings.llm.temperature == 0.3


def test_unknown_key_names_file_line_and_suggestion(tmp_path: Path) -> None:
    text = '[llm]\nmodel = "m"\n\n[chat]\nstrem = false\n'
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    assert info.value.message == f"{tmp_path / 'c.toml'}:5: unknown key 'chat.strem'"
    assert info.value.hint == "did you mean 'stream'?"
    assert info.value.exit_code == 2


def test_bad_toml_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"invalid TOML: .*line 3"):
        load_text(tmp_path, '[llm]\nmodel = "m"\ntemperature = = 1\n')


def test_wrong_type_names_key_and_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"c\.toml:2: llm\.temperature: .*\(got 'hot'\)"):
        load_text(tmp_path, '[llm]\ntemperature = "hot"\n')


def test_preprocessor_errors_point_into_the_right_table(tmp_path: Path) -> None:
    text = (
        '[[chat_memory.preprocessors]]\ntype = "filter"\nroles = ["user"]\n\n'
        '[[chat_memory.preprocessors]]\ntype = "window"\nsize = -1\n'
    )
    with pytest.raises(ConfigError, match=r"c\.toml:7: chat_memory\.preprocessors\.1\.size"):
        load_text(tmp_path, text)
    with pytest.raises(ConfigError, match="invalid regular expression"):
        load_text(tmp_path, '[[chat_memory.preprocessors]]\ntype = "redact"\npattern = "(["\n')


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^env KOOG_TEMPERATURE: llm\.temperature"):
        load_text(tmp_path, "", env={"KOOG_TEMPERATURE": "warm"})


def test_invalid_default_session_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid session name"):
        load_text(tmp_path, '[chat]\ndefault_session = "../x"\n')


def test_find_line_handles_arrays_of_tables() -> None:
    text = "[a]\nx = 1\n[[p]]\ny = 1\n[[p]]\ny = 2\n"
    assert loader.find_line(text, "a.x") == 2
    assert loader.find_line(text, "p.1.y") == 6
    assert loader.find_line(text, "p.1.z") == 5


def test_example_is_valid_toml_for_config_init() -> None:
    tomllib.loads((ROOT / "koogcli" / "config" / "example.toml").read_text())


def test_two_serve_tokens_with_one_string_are_an_error(tmp_path: Path) -> None:
    """Only the first grant would ever apply; the error never repeats the secret."""
    secret = "s3cret-token-0123456789"
    text = f'[[serve.tokens]]\ntoken = "{secret}"\n[[serve.tokens]]\ntoken = "{secret}"\n'
    with pytest.raises(ConfigError, match="token 2 repeats an earlier token") as info:
        load_text(tmp_path, text)
    assert secret not in info.value.message


def test_an_origin_wildcard_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"serve\.allowed_origins: '\*' is a wildcard"):
        load_text(tmp_path, '[serve]\nallowed_origins = ["*"]\n')
    loaded = load_text(tmp_path, '[serve]\nallowed_origins = ["http://localhost:3000"]\n')
    assert loaded.settings.serve.allowed_origins == ["http://localhost:3000"]


@pytest.mark.parametrize(
    ("table", "key"),
    [("persistence", "enabled"), ("chat", "stream"), ("serve", "access_log")],
)
def test_a_boolean_written_as_a_string_is_refused(tmp_path: Path, table: str, key: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f'[{table}]\n{key} = "false"\n')
    with pytest.raises(ConfigError, match=rf"c.toml:2: {table}.{key}: .*boolean"):
        loader.load(path, explicit=True)


def test_an_environment_boolean_is_read_as_words(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("")
    for word, meant in (("false", False), ("0", False), ("no", False), ("TRUE", True)):
        loaded = loader.load(path, explicit=True, env={"KOOG_STREAM": word})
        assert loaded.settings.chat.stream is meant
    with pytest.raises(ConfigError, match="KOOG_STREAM"):
        loader.load(path, explicit=True, env={"KOOG_STREAM": "maybe"})
